-- Register (or refresh) a tree subscriber: ARGV[3] subscriber id, ARGV[4] its lease in ms, ARGV[5]
-- the tree stream's length it asks for, ARGV[6] a zxid to resume after ('' for none).
-- If no subscriber was registered, writes stopped recording: a marker entry at the current zxid
-- tells readers that changes up to it may be missing (tree:meta gap). The stream keeps the
-- largest length asked for by the subscribers registered since the last marker.
-- Returns {zxid, newest entry id ('' if none), gap zxid, id of the newest entry at or before the
-- resume zxid ('' if none or none asked)}: entries after the newest one have larger zxids.
local id, lease, maxlen, since = ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6]
local zxid = current_zxid()
if not tree_live() then
  redis.call('HSET', TREE_META, 'maxlen', maxlen, 'gap', fmt(zxid))
  tree_append(zxid, maxlen, {'k', 'm', 'p', '', 's', '', 'd', ''})
elseif tonumber(tree_maxlen()) < tonumber(maxlen) then
  redis.call('HSET', TREE_META, 'maxlen', maxlen)
end
redis.call('ZADD', TREE_SUBS, fmt(now_ms() + lease), id)
local newest = redis.call('XREVRANGE', TREE, '+', '-', 'COUNT', 1)
local covering = {}
if since ~= '' then
  covering = redis.call('XREVRANGE', TREE, since .. '-18446744073709551615', '-', 'COUNT', 1)
end
local newest_id, covering_id = '', ''
if #newest > 0 then newest_id = newest[1][1] end
if #covering > 0 then covering_id = covering[1][1] end
return {fmt(zxid), newest_id, redis.call('HGET', TREE_META, 'gap') or '0', covering_id}
