"""The world a log is replayed in: the workload, the machine, the site model fitted to the
log (site.toml), the replay options it sets, and the train / validation / test split.

Modules:

* :mod:`~hpcpolicy.world.site_model`: ``SiteModel``, what ``calibrate`` fits;
* :mod:`~hpcpolicy.world.site_toml`: site.toml read and written;
* :mod:`~hpcpolicy.world.apply`: a site model applied to a workload and replay options;
* :mod:`~hpcpolicy.world.split`: the train / validation / test parts of a log.
"""

from hpcpolicy.world.apply import World, apply_site, eligible_delay
from hpcpolicy.world.site_model import Outage, Pool, SiteModel
from hpcpolicy.world.site_toml import dumps, load_site, loads, save_site

__all__ = ["Outage", "Pool", "SiteModel", "World", "apply_site", "dumps", "eligible_delay",
           "load_site", "loads", "save_site"]
