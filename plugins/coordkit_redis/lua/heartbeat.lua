-- Renew a session: ARGV[3] session id, ARGV[4] timeout ms. Returns 1 if it was alive, 0 if it had
-- expired (its ephemerals are then deleted here, if no reaper got there first). Every heartbeat
-- also reaps other overdue sessions, so ephemerals vanish even when their owner is gone for good.
local sid, timeout = ARGV[3], tonumber(ARGV[4])
local alive = redis.call('PEXPIRE', session_key(sid), timeout) == 1
if alive then
  redis.call('ZADD', DEADLINES, fmt(now_ms() + timeout), sid)
else
  end_session(sid, true)
end
reap_overdue(100)
finish()
if alive then return 1 end
return 0
