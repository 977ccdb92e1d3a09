"""Reproduction of the papers' targets: shape checks from the papers, their verdicts, status."""
