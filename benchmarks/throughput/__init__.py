"""Throughput suite: env steps per second of the embedded engine, its SMAC interface and Ray, and SMAX."""
