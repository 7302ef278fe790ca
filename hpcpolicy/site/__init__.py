"""Site models fitted and measured: ``calibrate`` fits a log's world (the model itself and its
use in a replay are :mod:`hpcpolicy.world`), and ``fidelity`` measures how well a replay of
the log as it was matches what the site saw."""
