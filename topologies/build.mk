# topologies/: wb-linkem (owned by the topologies part)
