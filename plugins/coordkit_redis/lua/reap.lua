-- Expire every overdue session (any client may run it). Returns how many were reaped.
local reaped = reap_overdue(1000)
finish()
return reaped
