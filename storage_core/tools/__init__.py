"""The klog command line and its commands."""
