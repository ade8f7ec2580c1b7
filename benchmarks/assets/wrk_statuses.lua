-- wrk -s wrk_statuses.lua: counts the responses by HTTP status (the overload benchmark).
-- Each wrk thread counts its own; done() prints their sums, one
-- "status <code>: <count>" line per status, after wrk's report.

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  statuses = {}
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local total = {}
  for _, thread in ipairs(threads) do
    for status, count in pairs(thread:get("statuses")) do
      total[status] = (total[status] or 0) + count
    end
  end
  for status, count in pairs(total) do
    io.write(string.format("status %d: %d\n", status, count))
  end
end
