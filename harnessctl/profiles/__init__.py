"""Behavior profiles of harnesses, the rescue matrix, the router and re-anchoring.

Modules: ``build`` (numbers from rollouts), ``card`` (the behavior card in words),
``files`` (reviewable YAML), ``runner`` (evaluate + build + store), ``router`` and
``voting`` (ranking a pool for a failed task), ``routed`` (Rank-1 routed eval),
``reanchor`` (drift under a changed policy). Nothing heavy is imported here.
"""
