-- Writes: ARGV[3] session id, ARGV[4] mode, then four words per op: kind, path, data, arg.
--   kinds: c create (arg: flags e=ephemeral s=sequential p=make parents), s set (arg: version),
--          d delete (arg: version), r recursive delete (arg: version), k check (arg: version)
--   mode 'm': all ops in one transaction, all or nothing (ZooKeeper's multi)
--   mode 'e': every op its own transaction (bulk apply and single calls; plain creates and sets
--        take the engine's fast paths)
-- The reply is one string, one line per op (paths never contain '\n' or '\t'):
--   P<created path> | S<stat as Tx:stat writes it> | K (done) | E<code>\t<path>\t<message>
-- or, for the whole call, "!session" (the session has expired) or, in mode 'm',
-- "!<op index>\t<code>\t<path>\t<message>" (nothing was written).
local sid = ARGV[3]
local mode = ARGV[4]
local FIRST = 5
local count = (#ARGV - FIRST + 1) / 4

local session_timeout = redis.call('GET', session_key(sid))
if not session_timeout then
  return '!session'
end
-- A session's writes renew it, as any request renews a ZooKeeper session: a busy client's session
-- does not depend on its heartbeat alone.
renew_session(sid, session_timeout)

local function run(tx, i, in_multi)
  local base = FIRST + (i - 1) * 4
  local kind, path, data, arg = ARGV[base], ARGV[base + 1], ARGV[base + 2], ARGV[base + 3]
  if kind == 'c' then
    local owner = '0'
    if arg ~= '' then
      if string.find(arg, 'e', 1, true) then owner = sid end
      if string.find(arg, 'p', 1, true) then
        local target = path
        if string.sub(target, -1) == '/' then target = target .. 'x' end
        for _, ancestor in ipairs(ancestors(target)) do
          if not tx:exists(ancestor) then
            local _, err = tx:create(ancestor, '', '0', false)
            if err then return nil, err end
          end
        end
      end
    end
    local created, err = tx:create(path, data, owner, arg ~= '' and string.find(arg, 's', 1, true) ~= nil)
    if err then return nil, err end
    return 'P' .. created
  elseif kind == 's' then
    local n, err = tx:set(path, data, tonumber(arg))
    if err then return nil, err end
    return 'S' .. tx:stat(n, #data)
  elseif kind == 'd' or kind == 'r' then
    local done, err
    if in_multi then
      done, err = tx:delete_in_multi(path, tonumber(arg))
    else
      done, err = tx:delete(path, tonumber(arg), kind == 'r')
    end
    if err then return nil, err end
    return 'K'
  elseif kind == 'k' then
    local _, err = tx:existing(path, tonumber(arg))
    if err then return nil, err end
    return 'K'
  end
  return fail('BADARG', path, 'unknown operation kind ' .. tostring(kind))
end

local results = {}
if mode == 'm' then
  local tx = new_tx(current_zxid() + 1)
  for i = 1, count do
    local result, err = run(tx, i, true)
    if err then return '!' .. fmt(i - 1) .. '\t' .. err[1] .. '\t' .. err[2] .. '\t' .. err[3] end
    results[i] = result
  end
  tx:flush()
else
  for i = 1, count do
    local base = FIRST + (i - 1) * 4
    local kind, arg = ARGV[base], ARGV[base + 3]
    local result, err
    if kind == 'c' and arg == '' then
      result, err = fast_create(ARGV[base + 1], ARGV[base + 2], current_zxid() + 1)
      if result then result = 'P' .. result end
    elseif kind == 's' then
      result, err = fast_set(ARGV[base + 1], ARGV[base + 2], tonumber(arg), current_zxid() + 1)
      if result then result = 'S' .. result end
    else
      local tx = new_tx(current_zxid() + 1)
      result, err = run(tx, i, false)
      if err then tx:discard() else tx:flush() end
    end
    if err then
      results[i] = 'E' .. err[1] .. '\t' .. err[2] .. '\t' .. err[3]
    else
      results[i] = result
    end
  end
end
finish()
return table.concat(results, '\n')
