"""Analysis of stored runs: load, derive, figure specs, plots, report (`wanbench plot`)."""
