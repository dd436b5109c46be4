-- wrk script of bench/e2e.sh: POSTs the file $E2E_BODY with Content-Type and Accept $E2E_TYPE
-- (HTTP/1.1 keep-alive), and prints one machine-readable RESULT line (latencies in µs).
local f = assert(io.open(assert(os.getenv("E2E_BODY"), "E2E_BODY unset"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = assert(os.getenv("E2E_TYPE"), "E2E_TYPE unset")
wrk.headers["Accept"] = os.getenv("E2E_TYPE")
if os.getenv("E2E_ACCEPT_ENCODING") then
  wrk.headers["Accept-Encoding"] = os.getenv("E2E_ACCEPT_ENCODING")
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d duration_us=%d bytes=%d p50_us=%d p99_us=%d max_us=%d " ..
    "err_connect=%d err_read=%d err_write=%d err_status=%d err_timeout=%d\n",
    summary.requests, summary.duration, summary.bytes,
    latency:percentile(50), latency:percentile(99), latency.max,
    e.connect, e.read, e.write, e.status, e.timeout))
end
