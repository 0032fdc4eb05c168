-- The id of the tree stream's newest entry ('' if none), without its fields (an entry of a bulk
-- call holds a thousand changes).
local newest = redis.call('XREVRANGE', TREE, '+', '-', 'COUNT', 1)
if #newest == 0 then return '' end
return newest[1][1]
