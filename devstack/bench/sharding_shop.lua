-- sysbench script of `make bench-sharding` (devstack/bench/sharding_bench.py): one statement per event, --sql with
-- its numbers filled in (string.format), sent as text (COM_QUERY: the proxy plans a statement on a sharded table
-- from its literals and refuses prepared ones), to whichever target --mysql-host/--mysql-port name. --draw says
-- which numbers:
--   key    one: a City_ID, 1 to --cities
--   after  one: a Shop_ID from 0 to --rows - 10
--   range  two: the first and last Shop_ID of a run of --span, within 1 to --rows

sysbench.cmdline.options = {
   sql = {"the statement, with %d for each number drawn", ""},
   draw = {"key, after or range", "key"},
   rows = {"Shop_ID runs from 1 to rows", 200000},
   cities = {"City_ID runs from 1 to cities", 100000},
   span = {"Shop_IDs a range covers", 1000},
}

function thread_init()
   drv = sysbench.sql.driver()
   con = drv:connect()
   sql = sysbench.opt.sql
   draw = sysbench.opt.draw
   rows = sysbench.opt.rows
   cities = sysbench.opt.cities
   span = sysbench.opt.span
   if sql == "" or (draw ~= "key" and draw ~= "after" and draw ~= "range") then
      error("need --sql and --draw=key, after or range")
   end
end

function thread_done()
   con:disconnect()
end

function event()
   if draw == "key" then
      con:query(string.format(sql, sysbench.rand.uniform(1, cities)))
   elseif draw == "after" then
      con:query(string.format(sql, sysbench.rand.uniform(0, rows - 10)))
   else
      local first = sysbench.rand.uniform(1, rows - span + 1)
      con:query(string.format(sql, first, first + span - 1))
   end
end
