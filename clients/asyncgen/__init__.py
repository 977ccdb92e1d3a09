"""The asyncio load generator: wb-sclient's hot and cold modes in portable Python.

Same options and result schema as wb-sclient (`python -m clients.asyncgen --help`); uvloop
is used when installed. A cross-check of the native generator at moderate rates.

options   its command line, from LoadSpec's fields
context   what one run's parts share: options, measured window, counters, loop, stop
conn      one connection and its response framing; connecting with S-Client's retry
schedule  the open loop's intended send times
hot       hot connections: sending on them, their replies, the backlog
cold      cold connections: the paced ramp, holding, one request every interval
generator the run: starts the parts, waits out warm-up and window, stops
report    the result document from the counters
"""
