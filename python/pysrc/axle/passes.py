"""Pass ordering from Python: the registered passes, the standard pipelines, and
:class:`Session`, an environment for pass-ordering agents (CompilerGym style).

A session holds one module. ``step(name)`` applies a pass (or any pipeline text, such as
``"fixpoint(max=4)[algsimp,cse,dce]"``) and returns the observation after it: ``instructions``,
the cost model's ``flops``, ``transcendentals`` and ``bytes``, whether the step ``changed`` the
module and its ``wall_seconds``. ``observe()`` returns the observation without a step,
``measure()`` compiles the module as it stands and returns its median run time in seconds, and
``hlo_text()`` the module.
"""

from ._axle import Session, pass_names, standard_pipelines

__all__ = ["Session", "pass_names", "standard_pipelines"]
