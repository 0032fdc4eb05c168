-- Read many nodes at once (one consistent snapshot per call): ARGV[3] a byte budget, ARGV[4..]
-- paths. The reply is one string: a first line with how many paths it answers (it stops once the
-- data read passes the budget, after at least one), then per path either "-\n" (no node) or a
-- header line "czxid,mzxid,pzxid,ctime,mtime,version,cversion,owner,data length,children\n"
-- followed by exactly data-length bytes of data.
local budget = tonumber(ARGV[3])
local out = {''}
local size = 0
local answered = 0
for i = 4, #ARGV do
  local v = redis.call('HMGET', node_key(ARGV[i]), 'cz', 'mz', 'pz', 'ct', 'mt', 'v', 'cv', 'eo', 'nc', 'd')
  if not v[1] then
    out[#out + 1] = '-\n'
  else
    local d = v[10]
    out[#out + 1] = v[1] .. ',' .. v[2] .. ',' .. v[3] .. ',' .. v[4] .. ',' .. v[5] .. ',' .. v[6] .. ','
      .. v[7] .. ',' .. v[8] .. ',' .. #d .. ',' .. v[9] .. '\n' .. d
    size = size + #d
  end
  answered = answered + 1
  if size > budget then break end
end
out[1] = answered .. '\n'
return table.concat(out)
