-- Renew a session: ARGV[3] session id, ARGV[4] timeout ms. Returns {1, gap} if it was alive, where
-- gap is the ms since its previous renewal (by a heartbeat or a write; -1 if unknown), or {0, gap}
-- if it had expired (its ephemerals are then deleted here, if no reaper got there first; gap is
-- from its deadline, -1 if a reaper removed that). Every heartbeat also reaps other overdue
-- sessions, so ephemerals vanish even when their owner is gone for good.
local sid, timeout = ARGV[3], tonumber(ARGV[4])
local gap
local alive = redis.call('EXISTS', session_key(sid)) == 1
if alive then
  gap = renew_session(sid, timeout)
else
  local deadline = redis.call('ZSCORE', DEADLINES, sid)
  gap = -1
  if deadline then gap = now_ms() - (tonumber(deadline) - timeout) end
  end_session(sid, true)
end
reap_overdue(100)
finish()
if alive then return {1, gap} end
return {0, gap}
