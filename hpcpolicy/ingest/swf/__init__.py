"""Standard Workload Format traces: the header, the field scan and the reader."""
