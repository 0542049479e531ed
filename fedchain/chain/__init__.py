"""The chain seam: compile, deploy, typed contract wrappers, node launcher, event decoding."""
