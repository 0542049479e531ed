"""Datasets, partitions and client faults."""
