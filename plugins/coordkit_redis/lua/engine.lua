-- coordkit engine: ZooKeeper's data model over Redis hashes and sets.
--
-- Prepended to every script. Every script gets KEYS[1] = the store's zxid counter (it carries the
-- store's hash tag, so Redis Cluster routes the call to the slot holding every key of the store),
-- ARGV[1] = the key prefix ("{name}:") and ARGV[2] = each change-stream shard's approximate MAXLEN.
--
-- Keys (P = ARGV[1]):
--   P n:<path>     hash: d data, cz czxid, mz mzxid, pz pzxid, ct ctime, mt mtime, v version,
--                  cv cversion, eo ephemeral owner ('0' = persistent), nc number of children,
--                  sq children created so far (ZooKeeper numbers sequential children by creations;
--                  cversion also counts deletions)
--   P c:<path>     set of child names
--   P s:<sid>      session key, value = timeout in ms, TTL = the session timeout
--   P deadlines    sorted set: session id -> deadline (server ms); the reaper reads it
--   P e:<sid>      set of the session's ephemeral paths
--   P zxid         global transaction counter
--   P log:<xx>     change-stream shard xx (00 to ff: the first two hex digits of the SHA-1 of the
--                  directory an event is filed under): one entry per script and shard, fields
--                  z (the script's last zxid: the global revision), n (the entry's number in its
--                  stream: 1, 2, ...; a reader that finds one missing was trimmed past) and
--                  e (events)
--   P expiries     stream of expired session ids (X events), one entry per script that reaped
--   P logseq       hash: stream name (log:<xx>, expiries, tree) -> entries appended so far
--   P tree         the tree stream (change feeds, coordkit_redis.treefeed): written only while a
--                  tree subscriber is registered; one entry per script, id <last zxid>-<number>,
--                  fields k (kinds: c created, s changed, d deleted, m marker), p (paths, '\n'-
--                  separated), s (the stats each op wrote, '\n'-separated, empty for a delete), d
--                  (the data each op wrote, concatenated: the stats give the lengths), z (each
--                  change's zxid, ','-separated; only when the entry holds several transactions)
--   P tree:subs    sorted set: tree subscriber id -> deadline (server ms) its client refreshes
--   P tree:meta    hash: maxlen (zxids whose entries the tree stream keeps), gap (zxid of the newest
--                  marker: changes up to it may be missing from the stream)
--
-- Writes go through a transaction overlay (Tx): every check runs against the overlay, and only a
-- transaction whose checks all passed is flushed to Redis, so a failed op changes nothing.

local P = ARGV[1]
local MAXLEN = ARGV[2]
local ZXID = KEYS[1]
local DEADLINES = P .. 'deadlines'
local EXPIRIES = P .. 'expiries'
local SEQUENCES = P .. 'logseq'

local function node_key(path) return P .. 'n:' .. path end
local function children_key(path) return P .. 'c:' .. path end
local function ephemerals_key(sid) return P .. 'e:' .. sid end
local function session_key(sid) return P .. 's:' .. sid end
local function fmt(n) return string.format('%d', n) end

local NOW = nil
local function now_ms()
  if NOW == nil then
    local t = redis.call('TIME')
    NOW = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return NOW
end

-- Parent path and name: scan back from the end for the last '/' (47).
local byte, sub = string.byte, string.sub
local function split(path)
  for i = #path, 1, -1 do
    if byte(path, i) == 47 then
      if i == 1 then return '/', sub(path, 2) end
      return sub(path, 1, i - 1), sub(path, i + 1)
    end
  end
  return '/', path
end

local function child_path(parent, name)
  if parent == '/' then return '/' .. name end
  return parent .. '/' .. name
end

-- Proper ancestors without the root, from the top: /a/b/c -> /a, /a/b
local function ancestors(path)
  local out = {}
  local pos = 2
  while true do
    local slash = string.find(path, '/', pos, true)
    if not slash then break end
    out[#out + 1] = string.sub(path, 1, slash - 1)
    pos = slash + 1
  end
  return out
end

local function fail(code, path, message) return nil, {code, path, message} end

-- -- the change stream ----------------------------------------------------------------------------

-- Events of the transactions committed so far, as kind, path pairs: D (data or existence of the
-- node may have changed), C (its children may have changed), X (the session <path> expired).
local EVENTS = {}
local LAST_ZXID = nil

-- Events are filed by directory, so that a client reads only the shards of what it watches: a D
-- event under the node's parent (the root's under itself), a C event under the node itself. Every
-- directory's events land in one shard, in commit order (coordkit_redis.keys mirrors this).
local SHARD_OF = {}
local function shard_key(directory)
  local key = SHARD_OF[directory]
  if key == nil then
    key = P .. 'log:' .. sub(redis.sha1hex(directory), 1, 2)
    SHARD_OF[directory] = key
  end
  return key
end

local function event_stream(kind, path)
  if kind == 'X' then return EXPIRIES end
  if kind == 'C' or path == '/' then return shard_key(path) end
  return shard_key((split(path)))
end

-- One stream entry per script call and stream touched, field e = kind and path alternating,
-- '\n'-separated (paths never contain '\n': coordkit.paths forbids control characters).
local function flush_stream()
  if #EVENTS == 0 then return end
  local groups, order = {}, {}
  for i = 1, #EVENTS, 2 do
    local key = event_stream(EVENTS[i], EVENTS[i + 1])
    local group = groups[key]
    if group == nil then
      group = {}
      groups[key] = group
      order[#order + 1] = key
    end
    group[#group + 1] = EVENTS[i]
    group[#group + 1] = EVENTS[i + 1]
  end
  local z = LAST_ZXID or 0
  for _, key in ipairs(order) do
    -- Numbered: trimming drops entries silently, a reader sees a gap in the numbers.
    local n = redis.call('HINCRBY', SEQUENCES, sub(key, #P + 1), 1)
    redis.call('XADD', key, 'MAXLEN', '~', MAXLEN, '*', 'z', z, 'n', n, 'e', table.concat(groups[key], '\n'))
  end
end

local function publish(kind, path)
  EVENTS[#EVENTS + 1] = kind
  EVENTS[#EVENTS + 1] = path
end

-- -- the tree stream ------------------------------------------------------------------------------

-- Change feeds need one total order with the state each op wrote, so while a tree subscriber is
-- registered every transaction also appends its changes to one stream. Whether one is, is looked up
-- once per script, at its first change: a store nobody follows pays one ZREVRANGE per write script.
local TREE = P .. 'tree'
local TREE_SUBS = P .. 'tree:subs'
local TREE_META = P .. 'tree:meta'
local TREE_LIVE = nil
-- Changes of this script's transactions, in commit order: zxid, kind, path, data, stat (5 slots;
-- false for a delete's data and stat: a nil would leave a hole, which '#' does not survive).
local TREE_LOG = {}

local function tree_live()
  if TREE_LIVE == nil then
    local top = redis.call('ZREVRANGE', TREE_SUBS, 0, 0, 'WITHSCORES')
    if #top == 0 then
      TREE_LIVE = false
    elseif tonumber(top[2]) < now_ms() then
      redis.call('DEL', TREE_SUBS)  -- every registration has expired: stop paying for them
      TREE_LIVE = false
    else
      TREE_LIVE = true
    end
  end
  return TREE_LIVE
end

local function tree_record(zxid, kind, path, data, stat)
  if not tree_live() then return end
  local log = TREE_LOG
  local i = #log
  log[i + 1], log[i + 2], log[i + 3], log[i + 4], log[i + 5] = zxid, kind, path, data or false,
    stat or false
end

-- Append one entry, id <zxid>-<number>: numbered, so a reader sees trimming as a gap, and ordered
-- by zxid, so a resume finds its place with XREVRANGE. The stream keeps the entries of the last
-- `maxlen` zxids (MINID: a bulk call's thousand transactions in one entry count a thousand).
-- Should the counters ever go back under a surviving stream (keys deleted by hand), the stream
-- starts afresh rather than fail the write: readers see it reset and re-read.
local function tree_append(zxid, maxlen, fields)
  local n = redis.call('HINCRBY', SEQUENCES, 'tree', 1)
  local id = fmt(zxid) .. '-' .. fmt(n)
  local floor = fmt(math.max(0, zxid - tonumber(maxlen)))
  local done = redis.pcall('XADD', TREE, 'MINID', '~', floor, id, unpack(fields))
  if type(done) == 'table' and done.err then
    redis.call('DEL', TREE)
    redis.call('XADD', TREE, id, unpack(fields))
  end
end

local function tree_maxlen()
  return redis.call('HGET', TREE_META, 'maxlen') or '100000'
end

-- One entry per script: its transactions' changes in commit order, and (when it holds more than
-- one transaction) each change's zxid in field z.
local function flush_tree()
  local log = TREE_LOG
  if #log == 0 then return end
  local kinds, paths, stats, data, zxids = {}, {}, {}, {}, {}
  local first, last = log[1], log[#log - 4]
  for i = 1, #log, 5 do
    local j = #kinds + 1
    kinds[j], paths[j], stats[j], zxids[j] = log[i + 1], log[i + 2], log[i + 4] or '', log[i]
    if log[i + 3] then data[#data + 1] = log[i + 3] end
  end
  local fields = {'k', table.concat(kinds), 'p', table.concat(paths, '\n'),
    's', table.concat(stats, '\n'), 'd', table.concat(data)}
  if first ~= last then
    fields[9], fields[10] = 'z', table.concat(zxids, ',')
  end
  tree_append(last, tree_maxlen(), fields)
end

-- -- zxid ------------------------------------------------------------------------------------------

local ZX = nil
local function current_zxid()
  if ZX == nil then ZX = tonumber(redis.call('GET', ZXID) or '0') end
  return ZX
end
local function commit_zxid(zxid)
  ZX = zxid
end
local function save_zxid()
  if ZX ~= nil then redis.call('SET', ZXID, fmt(ZX)) end
end

-- -- the transaction overlay -----------------------------------------------------------------------

local Tx = {}
Tx.__index = Tx

-- Events go straight to EVENTS; a discarded transaction cuts them back to its mark.
local function new_tx(zxid)
  return setmetatable({zxid = zxid, nodes = {}, origin = {}, child_ops = {}, mark = #EVENTS,
                       tree_mark = #TREE_LOG}, Tx)
end

function Tx:discard()
  for i = #EVENTS, self.mark + 1, -1 do EVENTS[i] = nil end
  for i = #TREE_LOG, self.tree_mark + 1, -1 do TREE_LOG[i] = nil end
end

-- A node's record in the overlay (false: no such node). Checks need only the version, cversion,
-- owner and child count; `full` also reads what a returned stat needs (set). Numbers stay strings
-- until arithmetic needs them: a Lua number passed to redis.call is written as its exact digits.
function Tx:load(path, full)
  local n = self.nodes[path]
  if n ~= nil then
    if full and n and n.cz == nil then
      local v = redis.call('HMGET', node_key(path), 'cz', 'mz', 'pz', 'ct', 'mt')
      n.cz, n.ct = v[1], v[4]
      if n.mz == nil then n.mz, n.mt = v[2], v[5] end
      if n.pz == nil then n.pz = v[3] end
    end
    return n
  end
  if full then
    local v = redis.call('HMGET', node_key(path), 'v', 'cv', 'eo', 'nc', 'sq', 'cz', 'mz', 'pz', 'ct', 'mt')
    if not v[1] then
      self.nodes[path] = false
      self.origin[path] = false
      return false
    end
    n = {v = tonumber(v[1]), cv = tonumber(v[2]), eo = v[3], nc = tonumber(v[4]), sq = tonumber(v[5]),
         cz = v[6], mz = v[7], pz = v[8], ct = v[9], mt = v[10]}
  else
    local v = redis.call('HMGET', node_key(path), 'v', 'cv', 'eo', 'nc', 'sq')
    if not v[1] then
      self.nodes[path] = false
      self.origin[path] = false
      return false
    end
    n = {v = tonumber(v[1]), cv = tonumber(v[2]), eo = v[3], nc = tonumber(v[4]), sq = tonumber(v[5])}
  end
  self.nodes[path] = n
  self.origin[path] = n.eo
  return n
end

-- Existence only (cheaper than a load): a create needs nothing else about its target.
function Tx:exists(path)
  local n = self.nodes[path]
  if n ~= nil then return n ~= false end
  if redis.call('EXISTS', node_key(path)) == 1 then return true end
  self.nodes[path] = false
  self.origin[path] = false
  return false
end

function Tx:event(kind, path)
  EVENTS[#EVENTS + 1] = kind
  EVENTS[#EVENTS + 1] = path
end

-- A stat as text: czxid,mzxid,pzxid,ctime,mtime,version,cversion,owner,data length,children
function Tx:stat(n, data_length)
  return n.cz .. ',' .. n.mz .. ',' .. n.pz .. ',' .. n.ct .. ',' .. n.mt .. ',' .. n.v .. ','
    .. n.cv .. ',' .. n.eo .. ',' .. data_length .. ',' .. n.nc
end

function Tx:create(path, data, owner, sequential)
  local parent
  if byte(path, #path) == 47 then
    parent = sub(path, 1, -2)
    if parent == '' then parent = '/' end
  else
    parent = split(path)
  end
  local pn = self:load(parent)
  if not pn then return fail('NONODE', path, 'parent ' .. parent .. ' does not exist') end
  if pn.eo ~= '0' then return fail('EPHEMERALPARENT', path, 'parent ' .. parent .. ' is ephemeral') end
  if sequential then path = path .. string.format('%010d', pn.sq) end
  if self:exists(path) then return fail('NODEEXISTS', path, 'node already exists') end
  local z = self.zxid
  local now = now_ms()
  self.nodes[path] = {cz = z, mz = z, pz = z, ct = now, mt = now, v = 0, cv = 0, eo = owner, nc = 0,
                     sq = 0, d = data, dirty = true, fresh = true}
  pn.cv = pn.cv + 1
  pn.sq = pn.sq + 1
  pn.pz = z
  pn.nc = pn.nc + 1
  pn.kids = true
  pn.dirty = true
  local _, name = split(path)
  self.child_ops[#self.child_ops + 1] = {parent, name, true}
  self:event('D', path)
  self:event('C', parent)
  if tree_live() then
    tree_record(z, 'c', path, data, z .. ',' .. z .. ',' .. z .. ',' .. now .. ',' .. now .. ',0,0,'
      .. owner .. ',' .. #data .. ',0')
  end
  return path
end

function Tx:existing(path, version, full)
  local n = self:load(path, full)
  if not n then return fail('NONODE', path, 'no node') end
  if version ~= -1 and n.v ~= version then
    return fail('BADVERSION', path, 'expected version ' .. version .. ', node is at ' .. n.v)
  end
  return n
end

function Tx:set(path, data, version)
  local n, err = self:existing(path, version, true)
  if err then return nil, err end
  n.d = data
  n.v = n.v + 1
  n.mz = self.zxid
  n.mt = now_ms()
  n.dirty = true
  self:event('D', path)
  if tree_live() then tree_record(self.zxid, 's', path, data, self:stat(n, #data)) end
  return n
end

-- Remove an existing node whose children are already gone.
function Tx:remove(path)
  local parent, name = split(path)
  local pn = self:load(parent)
  self.nodes[path] = false
  pn.nc = pn.nc - 1
  pn.cv = pn.cv + 1
  pn.pz = self.zxid
  pn.kids = true
  pn.dirty = true
  self.child_ops[#self.child_ops + 1] = {parent, name, false}
  self:event('D', path)
  self:event('C', path)
  self:event('C', parent)
  tree_record(self.zxid, 'd', path, nil, nil)
end

-- Descendants of a stored node, deepest first (reads Redis: only for a fresh overlay).
local function descendants(path)
  local queue = {path}
  local i = 1
  while i <= #queue do
    local current = queue[i]
    i = i + 1
    for _, name in ipairs(redis.call('SMEMBERS', children_key(current))) do
      queue[#queue + 1] = child_path(current, name)
    end
  end
  local out = {}
  for j = #queue, 2, -1 do out[#out + 1] = queue[j] end
  return out
end

-- A delete inside a multi-op (as ZooKeeper's multi: never recursive).
function Tx:delete_in_multi(path, version)
  local n, err = self:existing(path, version)
  if err then return nil, err end
  if n.nc > 0 then return fail('NOTEMPTY', path, 'node has ' .. n.nc .. ' children') end
  if path == '/' then return fail('INVALIDPATH', path, 'the root node has no parent') end
  self:remove(path)
  return 1
end

-- A single delete, optionally of the whole subtree (needs a fresh overlay).
function Tx:delete(path, version, recursive)
  local n, err = self:existing(path, version)
  if err then return nil, err end
  if path == '/' then return fail('ROOT', path, 'the root node cannot be deleted') end
  if recursive then
    for _, d in ipairs(descendants(path)) do
      self:load(d)
      self:remove(d)
    end
  elseif n.nc > 0 then
    return fail('NOTEMPTY', path, 'node has ' .. n.nc .. ' children')
  end
  self:remove(path)
  return 1
end

-- Write the overlay to Redis (every check has passed).
function Tx:flush()
  -- Distinct keys: the order of node writes does not matter; child set changes keep theirs.
  local origin = self.origin
  for path, n in pairs(self.nodes) do
    local was = origin[path]
    if n == false then
      if was ~= false then
        redis.call('DEL', node_key(path))
        if was ~= '0' then redis.call('SREM', ephemerals_key(was), path) end
      end
    elseif n.dirty then
      if n.fresh then
        redis.call('HSET', node_key(path), 'd', n.d, 'cz', n.cz, 'mz', n.mz, 'pz', n.pz, 'ct', n.ct,
          'mt', n.mt, 'v', n.v, 'cv', n.cv, 'eo', n.eo, 'nc', n.nc, 'sq', n.sq)
      elseif n.d ~= nil and n.kids then
        redis.call('HSET', node_key(path), 'd', n.d, 'mz', n.mz, 'mt', n.mt, 'v', n.v,
          'pz', n.pz, 'cv', n.cv, 'nc', n.nc, 'sq', n.sq)
      elseif n.d ~= nil then
        redis.call('HSET', node_key(path), 'd', n.d, 'mz', n.mz, 'mt', n.mt, 'v', n.v)
      else
        redis.call('HSET', node_key(path), 'pz', n.pz, 'cv', n.cv, 'nc', n.nc, 'sq', n.sq)
      end
      if was ~= n.eo then
        if was ~= false and was ~= '0' then redis.call('SREM', ephemerals_key(was), path) end
        if n.eo ~= '0' then redis.call('SADD', ephemerals_key(n.eo), path) end
      end
    end
  end
  for _, op in ipairs(self.child_ops) do
    if op[3] then
      redis.call('SADD', children_key(op[1]), op[2])
    else
      redis.call('SREM', children_key(op[1]), op[2])
    end
  end
  commit_zxid(self.zxid)
  LAST_ZXID = self.zxid
end

-- -- fast paths -----------------------------------------------------------------------------------
-- A plain create (persistent, not sequential, no parents to make) and a set, each in its own
-- transaction, are the bulk calls' hot path: the same checks as Tx:create / Tx:set, all before any
-- write, without the overlay's bookkeeping.

local function fast_create(path, data, zxid)
  local parent, name = split(path)
  local p = redis.call('HMGET', node_key(parent), 'cv', 'eo', 'nc', 'sq')
  if not p[1] then return fail('NONODE', path, 'parent ' .. parent .. ' does not exist') end
  if p[2] ~= '0' then return fail('EPHEMERALPARENT', path, 'parent ' .. parent .. ' is ephemeral') end
  if redis.call('EXISTS', node_key(path)) == 1 then
    return fail('NODEEXISTS', path, 'node already exists')
  end
  local now = now_ms()
  redis.call('HSET', node_key(path), 'd', data, 'cz', zxid, 'mz', zxid, 'pz', zxid, 'ct', now,
    'mt', now, 'v', 0, 'cv', 0, 'eo', '0', 'nc', 0, 'sq', 0)
  redis.call('HSET', node_key(parent), 'cv', tonumber(p[1]) + 1, 'pz', zxid, 'nc', tonumber(p[3]) + 1,
    'sq', tonumber(p[4]) + 1)
  redis.call('SADD', children_key(parent), name)
  publish('D', path)
  publish('C', parent)
  if tree_live() then
    tree_record(zxid, 'c', path, data, zxid .. ',' .. zxid .. ',' .. zxid .. ',' .. now .. ',' .. now
      .. ',0,0,0,' .. #data .. ',0')
  end
  commit_zxid(zxid)
  LAST_ZXID = zxid
  return path
end

-- Returns the new stat as Tx:stat writes it.
local function fast_set(path, data, version, zxid)
  local key = node_key(path)
  local v = redis.call('HMGET', key, 'v', 'cz', 'pz', 'ct', 'cv', 'eo', 'nc')
  if not v[1] then return fail('NONODE', path, 'no node') end
  local current = tonumber(v[1])
  if version ~= -1 and current ~= version then
    return fail('BADVERSION', path, 'expected version ' .. version .. ', node is at ' .. current)
  end
  local now = now_ms()
  redis.call('HSET', key, 'd', data, 'mz', zxid, 'mt', now, 'v', current + 1)
  publish('D', path)
  commit_zxid(zxid)
  LAST_ZXID = zxid
  local stat = v[2] .. ',' .. zxid .. ',' .. v[3] .. ',' .. v[4] .. ',' .. now .. ',' .. (current + 1)
    .. ',' .. v[5] .. ',' .. v[6] .. ',' .. #data .. ',' .. v[7]
  if tree_live() then tree_record(zxid, 's', path, data, stat) end
  return stat
end

-- -- sessions --------------------------------------------------------------------------------------

local function ensure_root()
  if redis.call('EXISTS', node_key('/')) == 0 then
    redis.call('HSET', node_key('/'), 'd', '', 'cz', '0', 'mz', '0', 'pz', '0', 'ct', '0', 'mt', '0',
      'v', '0', 'cv', '0', 'eo', '0', 'nc', '0', 'sq', '0')
  end
end

-- Renew a live session for `timeout` ms (its key's value); returns the ms since its last renewal
-- (-1 if unknown): its deadline was set to that renewal plus the timeout.
local function renew_session(sid, timeout)
  local previous = redis.call('ZSCORE', DEADLINES, sid)
  redis.call('PEXPIRE', session_key(sid), timeout)
  redis.call('ZADD', DEADLINES, fmt(now_ms() + tonumber(timeout)), sid)
  if not previous then return -1 end
  return now_ms() - (tonumber(previous) - tonumber(timeout))
end

-- End a session: delete its ephemeral nodes in one transaction, then its keys. `expired` adds an
-- "X<sid>" event so the owner learns at once that its session is gone.
local function end_session(sid, expired)
  local listed = redis.call('ZREM', DEADLINES, sid)
  local paths = redis.call('SMEMBERS', ephemerals_key(sid))
  if #paths > 0 then
    table.sort(paths)
    local tx = new_tx(current_zxid() + 1)
    for _, path in ipairs(paths) do
      local n = tx:load(path)
      if n and n.eo == sid then tx:remove(path) end
    end
    tx:flush()
  end
  redis.call('DEL', ephemerals_key(sid), session_key(sid))
  if expired and (listed == 1 or #paths > 0) then publish('X', sid) end
end

-- Expire every session whose deadline has passed (their keys' TTLs ran out at the same moment).
local function reap_overdue(limit)
  local due = redis.call('ZRANGEBYSCORE', DEADLINES, '-inf', fmt(now_ms()), 'LIMIT', 0, limit)
  for _, sid in ipairs(due) do end_session(sid, true) end
  return #due
end

local function finish()
  save_zxid()
  flush_stream()
  flush_tree()
end
