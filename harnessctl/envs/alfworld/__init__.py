"""ALFWorld (household text games; Shridhar et al., ICLR 2021): work in progress toward the
``alfworld`` environment kind (issue #15). Landed so far: reading game files
(:mod:`.games`). The kind is not registered until its episodes and scoring run on the real
``alfworld`` package."""
