-- Open a session: ARGV[3] session id, ARGV[4] timeout ms. Returns 1, or 0 if the id is taken.
local sid, timeout = ARGV[3], tonumber(ARGV[4])
ensure_root()
if not redis.call('SET', session_key(sid), ARGV[4], 'NX', 'PX', ARGV[4]) then return 0 end
redis.call('ZADD', DEADLINES, fmt(now_ms() + timeout), sid)
reap_overdue(100)
finish()
return 1
