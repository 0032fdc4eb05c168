-- Read many nodes at once (one consistent snapshot per call): ARGV[3..] paths. The reply is one
-- string; per path either "-\n" (no node) or a header line
-- "czxid,mzxid,pzxid,ctime,mtime,version,cversion,owner,data length,children\n" followed by
-- exactly data-length bytes of data.
local out = {}
for i = 3, #ARGV do
  local v = redis.call('HMGET', node_key(ARGV[i]), 'cz', 'mz', 'pz', 'ct', 'mt', 'v', 'cv', 'eo', 'nc', 'd')
  if not v[1] then
    out[#out + 1] = '-\n'
  else
    local d = v[10]
    out[#out + 1] = v[1] .. ',' .. v[2] .. ',' .. v[3] .. ',' .. v[4] .. ',' .. v[5] .. ',' .. v[6] .. ','
      .. v[7] .. ',' .. v[8] .. ',' .. #d .. ',' .. v[9] .. '\n' .. d
  end
end
return table.concat(out)
