# clients/: wb-sclient (owned by the clients part)
