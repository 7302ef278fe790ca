"""GPU-cluster traces (Alibaba, Helios, Philly): CSV layouts, node lists and the readers."""
