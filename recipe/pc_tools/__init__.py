"""Offline tools over what the trainer writes, apart from the plugin that runs in Ray (``recipe.pc``).

* ``report``: run logs (``logs``) to validation curves (``curves``), tables (``tables``, ``intervals``) and
  figures (``plot``): ``python -m recipe.pc_tools.report``.
* ``plan``: rollout dumps (``dumps``) to the cost model's predictions (``costmodel``, ``predictions``) and their
  check against runs (``measured``): ``python -m recipe.pc_tools.plan``.
* ``defaults``: the Pilot-Commit defaults they share with the trainer, read from its YAML.
"""
