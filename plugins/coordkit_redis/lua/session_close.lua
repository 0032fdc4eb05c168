-- Close a session: ARGV[3] session id. Deletes its ephemeral nodes and its keys.
end_session(ARGV[3], false)
finish()
return 1
