-- Children of ARGV[3]: {stat fields as stat.lua..., names} or nil when the node is missing. The
-- names come as one '\n'-separated string (names never contain '\n'): a client parses one reply
-- element instead of one per child, which matters to a watch on a busy directory.
local path = ARGV[3]
local key = node_key(path)
local v = redis.call('HMGET', key, 'cz', 'mz', 'pz', 'ct', 'mt', 'v', 'cv', 'eo', 'nc')
if not v[1] then return false end
v[10] = redis.call('HSTRLEN', key, 'd')
v[11] = table.concat(redis.call('SMEMBERS', children_key(path)), '\n')
return v
