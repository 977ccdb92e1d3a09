"""The results format (docs/results-format.md): its one owner.

  format   the stored version, run ids, table names and their columns (those the validity
           rules read among them), ResultsFormatError
  compat   runs of earlier versions upgraded at load, a step per version
  rows     a generator's result document and the server's stats as a points row and long rows
  facts    a points row's window facts for the validity rules, each from its declared column
  verdict  a points row's stored verdict read back (the one reader)
  store    RunDir: one run directory, written and read (records, tables rebuilt from them)
  runset   one or many run directories read and checked into tidy frames (plot, compare)
"""
