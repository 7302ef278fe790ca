"""Site models: the world a log was scheduled in, fitted to the log (``hpcpolicy calibrate``),
and the fidelity of a replay of the log as it was (``hpcpolicy fidelity``)."""

from hpcpolicy.site.apply import World, apply_site, eligible_delay
from hpcpolicy.site.model import Outage, Pool, SiteModel
from hpcpolicy.site.toml_io import dumps, load_site, loads, save_site

__all__ = ["Outage", "Pool", "SiteModel", "World", "apply_site", "dumps", "eligible_delay",
           "load_site", "loads", "save_site"]
