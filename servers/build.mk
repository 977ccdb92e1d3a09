# servers/: wb-server (owned by the servers part)
