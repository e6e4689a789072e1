"""DBBench's in-sandbox code: ``hxenv_dbbench`` is copied next to the runtime in every sandbox.

Standard library only, relative imports only: in the sandbox it is importable as
``hxenv_dbbench``; on the host (the scorer and the table builder use the same SQL layer) as
``harnessctl.envs.dbbench.sandbox.hxenv_dbbench``.
"""
