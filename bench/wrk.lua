-- The bench's request script for wrk (bench/procs.ts, runLoad):
--   wrk -t1 -c<connections> -d<seconds>s -s bench/wrk.lua -H 'Authorization: …' <url> -- <kind> <prefix> <item>...
-- kind 'get':    items are paths; GET them in turn.
-- kind 'unique': items are webhook paths; POST {"record_id":"<prefix>-<thread>-<n>"} to item n mod #items, so every
--                request carries a record id no other request of the bench used (a 202 each).
-- kind 'fixed':  items are path, record id pairs; POST {"record_id":"<record id>"} to its own path, the pairs in turn
--                (the 409 scenario: each pair names a record with an active run on that webhook).
-- kind 'once':   prefix is a file of paths, one a line, the items a body and a method (POST or PATCH); send the body
--                to each path once, in order (the decision scenario: each path a task no request decided yet; the
--                record PATCH: each path a record no request changed yet). One thread only.
-- Every response's status is counted; done() prints one line, "wrk-json {...}", that runLoad parses: responses by
-- status, requests sent and made (the paths of 'once' used), wrk's socket errors (a response slower than --timeout
-- counts as a timeout) and latency percentiles in microseconds (wrk's histogram, after its own correction for
-- coordinated omission).

local threads = {}

function setup(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end

-- Per thread (each wrk thread has its own Lua state).
statuses = {}
sent = 0
local kind, prefix, paths, prepared, headers, once_body, once_method
local counter = 0

local function json_string(s)
  return '"' .. (s:gsub('[%c"\\]', function(c) return string.format("\\u%04x", c:byte()) end)) .. '"'
end

local function body(record_id)
  return '{"record_id":' .. json_string(record_id) .. '}'
end

function init(args)
  kind, prefix = args[1], args[2]
  headers = {}
  -- A Content-Type given with -H (any case) is replaced, not repeated: two would read as one invalid media type.
  for name, value in pairs(wrk.headers) do
    if name:lower() ~= "content-type" then headers[name] = value end
  end
  headers["Content-Type"] = "application/json"
  paths, prepared = {}, {}
  if kind == "get" then
    for i = 3, #args do prepared[#prepared + 1] = wrk.format("GET", args[i]) end
  elseif kind == "fixed" then
    for i = 3, #args, 2 do prepared[#prepared + 1] = wrk.format("POST", args[i], headers, body(args[i + 1])) end
  elseif kind == "unique" then
    for i = 3, #args do paths[#paths + 1] = args[i] end
  elseif kind == "once" then
    for line in io.lines(prefix) do paths[#paths + 1] = line end
    once_body, once_method = args[3], args[4] or "POST"
  else
    error("wrk.lua: unknown kind " .. tostring(kind))
  end
  if #prepared == 0 and #paths == 0 then error("wrk.lua: no paths") end
end

function request()
  sent = sent + 1
  local n = counter
  counter = counter + 1
  if kind == "unique" then
    return wrk.format("POST", paths[n % #paths + 1], headers, body(prefix .. "-" .. id .. "-" .. n))
  end
  if kind == "once" then
    -- Past the last path the last one again: its answer (a 409) counts as unexpected.
    return wrk.format(once_method, paths[math.min(n + 1, #paths)], headers, once_body)
  end
  return prepared[n % #prepared + 1]
end

function response(status)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency)
  local total, requests_made = {}, 0
  for _, thread in ipairs(threads) do
    for status, count in pairs(thread:get("statuses")) do total[status] = (total[status] or 0) + count end
    requests_made = requests_made + thread:get("sent")
  end
  -- wrk asks thread 1's script for one request before starting (script_verify_request) and never sends it.
  local requests_sent = requests_made - 1
  local codes = {}
  for status, count in pairs(total) do codes[#codes + 1] = string.format('"%d":%d', status, count) end
  local e = summary.errors
  io.write(string.format(
    'wrk-json {"durationUs":%.0f,"requests":%.0f,"bytes":%.0f,"sent":%.0f,"made":%.0f,"statuses":{%s},' ..
      '"errors":{"connect":%.0f,"read":%.0f,"write":%.0f,"timeout":%.0f},' ..
      '"latencyUs":{"p50":%.0f,"p90":%.0f,"p99":%.0f,"max":%.0f,"mean":%.1f}}\n',
    summary.duration, summary.requests, summary.bytes, requests_sent, requests_made, table.concat(codes, ","),
    e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
