"""Builders of test inputs that the benchmarks and the tests share: job tables, GPU job tables,
input bombs, output races, the readers' fuzzer and its SWF oracle, and a toy queue
environment. The tests import them from here; a benchmark never reaches into tests/."""
