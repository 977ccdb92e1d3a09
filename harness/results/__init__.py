"""The results format (docs/results-format.md): its one owner.

  format  schema version, run ids, table names and their columns, ResultsFormatError
  rows    a generator's result document and the server's stats as a points row and long rows
  store   RunDir: one run directory, written and read (records, tables rebuilt from them)
  runset  one or many run directories read and checked into tidy frames (plot, compare)
"""
