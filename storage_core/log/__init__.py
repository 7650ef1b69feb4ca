"""The log: segments, indexes, checkpoints, configs, log dirs and the commit of staged writes."""
