"""Slurm ``sacct`` exports: column layouts, the field scan, its compiled kernel and the reader."""
