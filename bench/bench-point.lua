-- bench-point.lua: the wrk script of bench/bench-point. One script, one
-- mode per run, chosen by the arguments after wrk's "--":
--
--   mode=get    account= table= sas= keys=N partitions=P
--       a point GET of a random existing entity per request. Keys follow
--       rt-load's mapping (tools/rt-load/rl_keys.h) with --pk-scheme seq
--       and --rk-scheme seq, so what `rt-load --preload N --partitions P
--       --pk-scheme seq` wrote is what is read: for id in [0, N),
--       u = id + 10^12, PartitionKey = "p" + 13 digits of (u mod P),
--       RowKey = "r" + 13 digits of (u div P).
--   mode=insert account= table= sas= bytes=B run=TAG partitions=P
--       an Insert Entity (POST, Prefer: return-no-content) of a new
--       entity of about B bytes of JSON per request. RowKeys are unique:
--       TAG (one per wrk run), the wrk thread and a per-thread counter.
--   mode=page   account= table= sas= pk=PK top=N
--       Query Entities: the first N entities of partition PK.
--
-- Every request carries the SAS token (sas=, the query string without
-- '?'): SharedKey would need an HMAC per request in Lua. response()
-- counts every answer outside 2xx (wrk's own counter only sees >= 400)
-- and keeps the first such status and the start of its body; done()
-- prints one line
--   WRKJSON {"requests":..,"duration_us":..,"bad":..,"bad_status":..,
--            "bad_body":"..",
--            "connect":..,"read":..,"write":..,"timeout":..,
--            "p50_us":..,"p99_us":..,"p999_us":..}
-- that bench-point parses (latencies are wrk's closed-loop ones).

local threads = {}
local nthreads = 0

function setup(thread)
   thread:set("tid", nthreads)
   nthreads = nthreads + 1
   table.insert(threads, thread)
end

local opt = {}
local counter = 0
local headers
local base
bad = 0
bad_status = 0
bad_body = ""

local function num(name, def)
   return tonumber(opt[name] or def)
end

function init(args)
   for _, a in ipairs(args) do
      local k, v = a:match("^([^=]+)=(.*)$")
      if k then
         opt[k] = v
      end
   end
   math.randomseed(os.time() + 7919 * (tid or 0))
   base = "/" .. (opt.account or "devstoreaccount1") .. "/" .. (opt.table or "t")
   headers = {
      ["Accept"] = "application/json;odata=nometadata",
      ["x-ms-version"] = "2019-02-02",
      ["DataServiceVersion"] = "3.0;NetFx",
      ["MaxDataServiceVersion"] = "3.0;NetFx",
   }
   if opt.mode == "insert" then
      headers["Content-Type"] = "application/json"
      headers["Prefer"] = "return-no-content"
      -- The padding that brings the entity to about bytes= of JSON.
      local fixed = 90
      local b = num("bytes", 1024)
      opt.pad = string.rep("x", b > fixed and b - fixed or 1)
   end
   if opt.mode == "page" then
      opt.path = string.format("%s()?$top=%d&$filter=PartitionKey%%20eq%%20%%27%s%%27&%s",
                               base, num("top", 1000), opt.pk or "p", opt.sas or "")
   end
end

local function key13(prefix, v)
   return prefix .. string.format("%013.0f", v)
end

function request()
   local mode = opt.mode
   if mode == "get" then
      local parts = num("partitions", 1)
      local id = math.random(0, num("keys", 1) - 1)
      local u = id + 1e12
      local pk = key13("p", u % parts)
      local rk = key13("r", math.floor(u / parts))
      return wrk.format("GET", string.format("%s(PartitionKey='%s',RowKey='%s')?%s",
                                             base, pk, rk, opt.sas or ""), headers)
   elseif mode == "insert" then
      counter = counter + 1
      local parts = num("partitions", 1000)
      local body = string.format(
         '{"PartitionKey":"i%s-%05d","RowKey":"%s-%d-%d","Bucket":%d,"Data":"%s"}',
         opt.run or "0", counter % parts, opt.run or "0", tid or 0, counter,
         counter % 100, opt.pad)
      return wrk.format("POST", base .. "?" .. (opt.sas or ""), headers, body)
   elseif mode == "page" then
      return wrk.format("GET", opt.path, headers)
   end
   return wrk.format("GET", "/", headers)
end

function response(status, hdrs, body)
   if status < 200 or status > 299 then
      bad = bad + 1
      if bad_status == 0 then
         bad_status = status
         bad_body = (body or ""):sub(1, 300)
      end
   end
end

function done(summary, latency, requests)
   local nbad, first, first_body = 0, 0, ""
   for _, t in ipairs(threads) do
      nbad = nbad + (t:get("bad") or 0)
      local s = t:get("bad_status") or 0
      if first == 0 and s ~= 0 then
         first = s
         first_body = t:get("bad_body") or ""
      end
   end
   -- The body as a JSON string: quotes, backslashes and controls escaped,
   -- bytes above ASCII (perhaps a character cut at 300 bytes) as '?'.
   first_body = first_body:gsub('[%c"\\]', function(c)
      return string.format("\\u%04x", c:byte())
   end):gsub('[\128-\255]', '?')
   local e = summary.errors
   io.write(string.format(
      'WRKJSON {"requests":%d,"duration_us":%d,"bad":%d,"bad_status":%d,"bad_body":"%s",' ..
      '"connect":%d,"read":%d,"write":%d,"timeout":%d,' ..
      '"p50_us":%d,"p99_us":%d,"p999_us":%d}\n',
      summary.requests, summary.duration, nbad, first, first_body,
      e.connect, e.read, e.write, e.timeout,
      latency:percentile(50), latency:percentile(99), latency:percentile(99.9)))
end
