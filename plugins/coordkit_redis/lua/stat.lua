-- Stat of ARGV[3]: {czxid, mzxid, pzxid, ctime, mtime, version, cversion, owner, nc, data length}
-- or nil when the node does not exist.
local key = node_key(ARGV[3])
local v = redis.call('HMGET', key, 'cz', 'mz', 'pz', 'ct', 'mt', 'v', 'cv', 'eo', 'nc')
if not v[1] then return false end
v[10] = redis.call('HSTRLEN', key, 'd')
return v
