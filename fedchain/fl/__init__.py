"""Pure numeric kernels: aggregation, contribution, reputation, rewards, pruning."""
