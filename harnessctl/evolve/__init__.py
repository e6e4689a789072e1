"""Directional harness evolution: directions, editors, validated patches, same-batch rewards."""
