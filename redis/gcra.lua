-- sluice GCRA decision inside Redis: all buckets of one decision, atomically.
--
-- KEYS[i]  the bucket keys, in evaluation order (one hash slot); for "c",
--          then a probe key the call writes.
-- ARGV[1]  "t" (take: all or nothing, in order), "a" (adjust: forced
--          charge / bounded give-back) or "c" (pay a local fallback's
--          decisions: a charge that stops at zero).
-- ARGV[2]  the instant in microseconds since the Unix epoch, or "" to use
--          the server's TIME.
-- ARGV[3+NF(i-1) ...] for KEYS[i]: T R U n cost shadow, and in "a" (where
--   NF is 7; else 6) a seventh field, taken (below)
--   T  ticks per token, R ticks per time unit (0: no refill), U microseconds
--   per time unit, n burst in tokens (capacity tau = n*T ticks, at most 2^50),
--   cost in tokens, shadow "1" for a shadow op. In "a", the sixth field
--   of a give-back (negative cost) is instead the instant of the take it
--   undoes: in microseconds since the epoch when ARGV[2] is given, else
--   (server time) its age, microseconds before now. Its seventh field,
--   taken, is how many tokens of that take were still outstanding (at
--   least -cost; 0 for any other op).
--   A connections slot has T 0, R the lease TTL in microseconds, U the
--   lease id, n the number of slots, cost 1 (take; adjust: -1 releases). Its
--   key is a sorted set of lease ids scored by their expiry.
-- "m" (a batch of takes) has ARGV[3] the number of decisions, then for each
-- a count of ops and their fields; its keys are the decisions' in order.
--
-- A stored bucket is 57 bytes: the byte 2, then T R U n w held H as
-- little-endian doubles (struct '<Bddddddd'): the tokens held, in ticks, at
-- instant w (in time units of U microseconds), and H, the latest instant
-- (in microseconds) of any take or forced charge on the bucket. Every stored
-- number is an integer below 2^53, so doubles hold them exactly, and reading
-- them back is one struct.unpack instead of parsing text. The 49-byte form
-- (the byte 1, then T R U n w held) and the text "T R U n w held" (decimal
-- integers) that earlier versions wrote are still read, exactly as before,
-- with H taken as w (no take can be later than the last write), and
-- rewritten in the 57-byte form at the bucket's next write. A missing key is
-- a full bucket at every instant (no H: a give-back cannot add to it), so a
-- bucket that a write leaves full (a give-back, a changed burst) is not
-- deleted but stored full at its instant w: it is full from w on, and a
-- caller with an older instant (WithClock: a process whose clock lags)
-- finds it as it was at that instant, not full. A give-back to a bucket
-- that is already full (refilled) leaves it as stored, full since an
-- earlier instant: storing it full at the give-back's instant would take
-- from a caller between the two what it had. Every bucket with refill
-- expires (PX) a second after it would be full again (a full one a second
-- after its write); only a full bucket without refill, full at every
-- instant, is deleted.
--
-- A give-back of c tokens that a take at instant a took adds at most
-- c*T - max(0, H - a)*R ticks (never fewer than 0), instants counted in
-- whole time units: a take after a that found the bucket refilled started
-- over from its own state, and what refilled between a and H may already
-- have been handed out again; giving it back would hand it out twice.
-- Given promptly, with no take since (H <= a), it gives back all c. A part
-- g of a take given back (a reservation settled for less), c tokens of it
-- still outstanding (the taken field), adds at most
-- min(g*T, c*T - max(0, H - a)*R) ticks: what the later take may have
-- handed out again is counted against the part kept first.
--
-- Take returns {denied, retry_us, permanent, overburst, #shadow, shadow...,
-- remaining...} with 0-based indexes (denied = -1: all passed), except that
-- a take of one bucket the first fast path admits returns remaining alone,
-- an integer (read as {-1, 0, 0, 0, 0, remaining}), and one the other fast
-- path admits with no shadow op over returns {-1, remaining...} (one
-- element per op and -1: never the length of the full form); a shadow op
-- that could not pass reports what its bucket holds (0 for a slot). On a
-- denial, remaining (what each bucket holds, nothing taken) is present when
-- the fast paths decided, absent when the general path did. Adjust and pay
-- return 0.

-- "x" (Redis Cluster, several slots of one node; run with the flag
-- allow-cross-slot-keys): KEYS[1] is the first key only, for routing;
-- ARGV[2] is the number of keys, then the keys, then the arguments of one
-- of the modes above.
local KEYS, ARGV = KEYS, ARGV
if ARGV[1] == 'x' then
  local nk = tonumber(ARGV[2])
  local k, a = {}, {}
  for i = 1, nk do k[i] = ARGV[2 + i] end
  for i = 3 + nk, #ARGV do a[#a + 1] = ARGV[i] end
  KEYS, ARGV = k, a
end

local MAXDEBT = 2251799813685248 -- 2^51 ticks
local NF = 6

-- Redis 3.2-4 need effects replication to write after TIME; later
-- versions always replicate effects (7 and later say their version in
-- REDIS_VERSION_NUM; the pcall costs each call on them for nothing).
if not redis.REDIS_VERSION_NUM and redis.replicate_commands then pcall(redis.replicate_commands) end

local mode = ARGV[1]
if mode == 'a' then NF = 7 end -- an adjustment's ops carry taken too
-- call is redis.call, looked up once. The hot paths below floor and ceil
-- integers by arithmetic rather than math.floor and math.ceil (a C call
-- each): with Lua's x % y = x - floor(x/y)*y, (x - x % y) / y is
-- floor(x/y) and (x + (-x) % y) / y is ceil(x/y), the same doubles, exact
-- below 2^53.
local call = redis.call
local now_us
if ARGV[2] == '' then
  local t = call('TIME')
  now_us = t[1] * 1000000 + t[2] -- Lua converts the strings as tonumber does
else
  now_us = tonumber(ARGV[2])
end

-- The commonest decision, one bucket taken at its stored parameters,
-- without building any table, closure or string but the reply and the
-- stored value (the same arithmetic as fast). The request's numbers are
-- decimal integers the client wrote, so arithmetic converts them exactly as
-- tonumber would, for less.
if mode == 't' and #KEYS == 1 and ARGV[8] == '0' and ARGV[3] ~= '0' then
  local T, R, U, n = ARGV[3] + 0, ARGV[4] + 0, ARGV[5] + 0, ARGV[6] + 0
  local cost = ARGV[7] + 0
  local tau = n * T
  local h = tau
  local ok = true
  local H = now_us -- the latest take: this one, unless a stored one is later
  local now = (now_us - now_us % U) / U
  local v = call('GET', KEYS[1])
  if v then
    -- the binary form with these parameters; anything else (other
    -- parameters, the earlier text form) goes to the general path
    local f, sT, sR, sU, sn, w, sh
    if #v == 57 then f, sT, sR, sU, sn, w, sh, H = struct.unpack('<Bddddddd', v) end
    if f ~= 2 or sT ~= T or sR ~= R or sU ~= U or sn ~= n then
      ok = false
    else
      h = sh
      if R > 0 then h = h + (now - w) * R end
      if h > tau then h = tau elseif h < -MAXDEBT then h = -MAXDEBT end
    end
  end
  if ok and cost > 0 and cost <= n then
    local need = cost * T
    if h >= need then
      local held = h - need
      if H < now_us then H = now_us end
      if R > 0 then -- a take of at least one token: held < tau
        -- PX as text: Redis turns a Lua number into text with "%.17g",
        -- slower than string.format's "%d", which is exact below 2^53
        local px = held - tau
        px = (px % R - px) / R * U -- ceil((tau - held) / R) * U
        px = (px + (-px) % 1000) / 1000 + 1000
        if px < 9007199254740992 then px = string.format('%d', px) end
        call('SET', KEYS[1], struct.pack('<Bddddddd', 2, T, R, U, n, now, held, H), 'PX', px)
      else
        call('SET', KEYS[1], struct.pack('<Bddddddd', 2, T, R, U, n, now, held, H))
      end
      -- admitted: what the bucket holds, alone (a table costs the call an
      -- eighth of its server time; the client reads it as
      -- {-1, 0, 0, 0, 0, held})
      return (held - held % T) / T
    end
    if R > 0 then
      return {0, math.ceil((need - h) / R) * U, 0, 0, 0, math.floor(h / T)}
    end
  end
end

-- KO and AO locate the decision being evaluated: its i-th key is
-- KEYS[KO + i] and its i-th op's fields are ARGV[AO + (i-1)*NF + 1 ...].
local KO, AO = 0, 2

-- fast decides one decision of nops ops when every bucket is missing or
-- stored with the parameters given (nothing to convert) and no key comes
-- twice, exactly as take would, reading each bucket once and writing only
-- what a successful take changed. It returns nil, having written nothing,
-- in any other case.
-- In a batch (mode "m") the fast path keeps each bucket it reads or
-- changes in cache (key -> {T, R, U, n, held at now, H (false: none),
-- dirty}, an array: cheaper to make than a table of named fields) and
-- writes it once, when the batch ends or before the general path runs:
-- now is the same for the whole batch, so a hot bucket is read and written
-- once per batch instead of once per decision.
local cache = nil

-- put stores held ticks of a bucket with parameters T R U n and latest
-- take H (microseconds). PX goes as text: Redis turns a Lua number into
-- text with "%.17g", slower than string.format's "%d", which is exact
-- below 2^53.
local function put(k, T, R, U, n, held, H)
  local tau = n * T
  if held >= tau then
    if R == 0 then -- full at every instant: nothing to keep
      redis.call('DEL', k)
      return
    end
    held = tau -- full from now on, not before (see the top of this file)
  end
  local val = struct.pack('<Bddddddd', 2, T, R, U, n, (now_us - now_us % U) / U, held, H)
  if R > 0 then
    local px = held - tau
    px = (px % R - px) / R * U -- ceil((tau - held) / R) * U
    px = (px + (-px) % 1000) / 1000 + 1000
    if px < 9007199254740992 then px = string.format('%d', px) end
    call('SET', k, val, 'PX', px)
  else
    call('SET', k, val)
  end
end

-- S holds, for op i of the decision fast is deciding, S[7i-6 .. 7i]: the
-- bucket's ticks at now, its latest take (false: none stored), its ticks
-- after the take (false: nothing taken), and the op's T R U n, each number
-- converted once (a conversion is glibc's strtod, about 400 instructions).
-- One table per call, made presized for three ops and reused by every
-- decision of a batch: a table that grows is rehashed at every power of
-- two, and each table a call makes costs it in Lua's garbage collection.
local S

local function fast(nops)
  if not S then
    S = {false, false, false, false, false, false, false, false, false, false, false,
      false, false, false, false, false, false, false, false, false, false}
  end
  local denied, retry, perm, over = -1, 0, false, false
  local shadowed, ns = nil, 0 -- made when a shadow op fails
  -- one pass: each op is read and, until a denial is permanent, decided
  -- (ops after a permanent denial are still read: any of them may send
  -- the decision to the general path, and a denial reports them); nothing
  -- is written before every op has been read
  for i = 1, nops do
    local k = KEYS[KO + i]
    -- a key that comes twice goes to the general path (a decision has few
    -- ops: comparing pairs is cheaper than filling a table)
    for j = KO + 1, KO + i - 1 do
      if KEYS[j] == k then return nil end
    end
    local b = AO + (i - 1) * NF
    if ARGV[b + 1] == '0' then return nil end -- a connections slot
    local T, R, U, n = ARGV[b + 1] + 0, ARGV[b + 2] + 0, ARGV[b + 3] + 0, ARGV[b + 4] + 0
    local tau = n * T
    local h, H = tau, false
    local c = cache and cache[k]
    if c then
      if c[1] ~= T or c[2] ~= R or c[3] ~= U or c[4] ~= n then return nil end
      h, H = c[5], c[6]
    else
      local v = call('GET', k)
      if v then
        -- the binary form with these parameters (see the fast path above)
        local f, sT, sR, sU, sn, w, sh, sH
        if #v == 57 then f, sT, sR, sU, sn, w, sh, sH = struct.unpack('<Bddddddd', v) end
        if f ~= 2 or sT ~= T or sR ~= R or sU ~= U or sn ~= n then return nil end
        h, H = sh, sH
        if R > 0 then h = h + ((now_us - now_us % U) / U - w) * R end
        if h > tau then h = tau elseif h < -MAXDEBT then h = -MAXDEBT end
      end
      if cache then cache[k] = {T, R, U, n, h, H, false} end
    end
    local o = 7 * i - 7
    S[o + 1], S[o + 2], S[o + 3], S[o + 4], S[o + 5], S[o + 6], S[o + 7] = h, H, false, T, R, U, n
    if not perm then
      local cost, shadow = ARGV[b + 5] + 0, ARGV[b + 6] == '1'
      local st, val = 0, h
      if cost <= 0 then
        -- a check: over unless the bucket holds a whole token (see try)
        if h < T then
          if R == 0 or n == 0 then st = 1 else st, val = 3, math.ceil((T - h) / R) * U end
        end
      elseif cost > n then
        st, val = 2, n > 0
      else
        local need = cost * T
        if h >= need then
          val = h - need
        elseif R == 0 then
          st = 1
        else
          st, val = 3, math.ceil((need - h) / R) * U
        end
      end
      if denied < 0 then
        if st == 0 then
          if cost > 0 then S[o + 3] = val end
        elseif shadow then
          ns = ns + 1 -- it holds S[7i-6]: nothing was taken
          if ns == 1 then shadowed = {i - 1} else shadowed[ns] = i - 1 end
        else
          denied = i
          if st == 1 then perm = true elseif st == 2 then perm, over = true, val else retry = val end
        end
      elseif not shadow then
        if st == 1 then
          perm, over, retry = true, false, 0
        elseif st == 2 then
          perm, over, retry = true, val, 0
        elseif st == 3 and val > retry then
          retry = val
        end
      end
    end
  end
  local out
  if denied >= 0 then
    -- a denial reports what every bucket holds (nothing was taken), so
    -- that the caller needs no second call to tell the client; computed
    -- here only, since only a denial needs it
    out = {denied - 1, retry, perm and 1 or 0, over and 1 or 0, ns}
    for j = 1, ns do out[5 + j] = shadowed[j] end
    for i = 1, nops do out[5 + ns + i] = math.floor(S[7 * i - 6] / S[7 * i - 3]) end
    return out
  end
  for i = 1, nops do
    local o = 7 * i - 7
    local held = S[o + 3]
    if held then
      local k = KEYS[KO + i]
      local ht = S[o + 2]
      if not ht or ht < now_us then ht = now_us end -- this take is the latest
      if cache then
        local c = cache[k]
        c[5], c[6], c[7] = held, ht, true
      else
        put(k, S[o + 4], S[o + 5], S[o + 6], S[o + 7], held, ht)
      end
    end
  end
  -- what each bucket holds now: after its take, or untouched (a check, a
  -- shadow op that could not pass)
  if ns == 0 then
    -- admitted, no shadow op over: {-1, remaining...}, four elements fewer
    -- than the full form (the client tells them apart by their length)
    out = {-1, false, false, false}
    for i = 1, nops do
      local o = 7 * i - 7
      local x, t = S[o + 3] or S[o + 1], S[o + 4]
      out[1 + i] = (x - x % t) / t
    end
    for j = nops + 2, 4 do out[j] = nil end -- fewer than three ops: no false left over
    return out
  end
  out = {-1, 0, 0, 0, ns}
  for j = 1, ns do out[5 + j] = shadowed[j] end
  for i = 1, nops do
    local o = 7 * i - 7
    out[5 + ns + i] = math.floor((S[o + 3] or S[o + 1]) / S[o + 4])
  end
  return out
end

-- A take decision goes the fast way before the general path's closures
-- are even made: general() makes them, only for a call that needs them
-- (each closure a call makes costs it, used or not).
if mode == 't' then
  local out = fast(#KEYS)
  if out then return out end
end

-- general makes the general path: take, and what adjust and pay use.
local function general()
  -- ms is a PX argument (see put).
  local function ms(x)
    if x < 9007199254740992 then return string.format('%d', x) end
    return x
  end

  local function op(i)
    local b = AO + (i - 1) * NF
    if ARGV[b + 1] == '0' then
      -- a connections slot: T 0, R the lease TTL in microseconds, U the lease
      return {T = 0, ttl = tonumber(ARGV[b + 2]), lease = ARGV[b + 3], n = tonumber(ARGV[b + 4])},
        tonumber(ARGV[b + 5]), ARGV[b + 6] == '1'
    end
    return {T = tonumber(ARGV[b + 1]), R = tonumber(ARGV[b + 2]), U = tonumber(ARGV[b + 3]),
      n = tonumber(ARGV[b + 4])}, tonumber(ARGV[b + 5]), ARGV[b + 6] == '1'
  end

  -- slot checks whether a connections slot is free (leases past their expiry
  -- are dropped): 0, slots left after taking one | 1 (no slot at all) |
  -- 3, retry in microseconds (a slot frees when a request ends, which no
  -- clock predicts: one second).
  local function slot(key, q)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now_us)
    local held = redis.call('ZCARD', key)
    if held < q.n then return 0, q.n - held - 1 end
    if q.n <= 0 then return 1 end
    return 3, 1000000
  end

  local function same(p, q)
    return p.T == q.T and p.R == q.R and p.U == q.U and p.n == q.n
  end

  local function clamp(h, tau)
    if h > tau then return tau end
    if h < -MAXDEBT then return -MAXDEBT end
    return h
  end

  -- held ticks of stored state s at now.
  local function refill(s)
    local tau = s.n * s.T
    if s.R == 0 then return clamp(s.held, tau) end
    local now = math.floor(now_us / s.U)
    return clamp(s.held + (now - s.w) * s.R, tau)
  end

  -- convert re-expresses h ticks of params p as ticks of params q: the same
  -- tokens (rounded down, capped at q's burst); a full bucket whose burst does
  -- not shrink stays full (bucket.Reconfigure).
  local function convert(p, h, q)
    local ptau, qtau = p.n * p.T, q.n * q.T
    if h >= ptau and q.n >= p.n then return qtau end
    if p.T == q.T then return clamp(h, qtau) end
    local a = math.abs(h)
    local whole = math.floor(a / p.T)
    local rem = a - whole * p.T
    local nh
    if h >= 0 then
      nh = whole * q.T + math.floor(rem * q.T / p.T)
    else
      nh = -(whole * q.T + math.ceil(rem * q.T / p.T))
    end
    return clamp(nh, qtau)
  end

  -- decode reads a stored bucket in any form, or returns nil. H is the
  -- latest take in microseconds; the earlier forms did not keep it, and no
  -- take was later than their last write, w.
  local function decode(v)
    local f = string.byte(v, 1)
    if (#v == 57 and f == 2) or (#v == 49 and f == 1) then
      local _, T, R, U, n, w, h, H
      if f == 2 then
        _, T, R, U, n, w, h, H = struct.unpack('<Bddddddd', v)
      else
        _, T, R, U, n, w, h = struct.unpack('<Bdddddd', v)
        H = w * U
      end
      -- only this script writes the form: its numbers are whole, T and U
      -- positive, R and n not negative
      if T >= 1 and R >= 0 and U >= 1 and n >= 0 and T % 1 == 0 and R % 1 == 0 and U % 1 == 0 and n % 1 == 0
        and w % 1 == 0 and h % 1 == 0 and H % 1 == 0 then
        return {T = T, R = R, U = U, n = n, w = w, held = h, H = H}
      end
      return nil
    end
    local T, R, U, n, w, h = string.match(v, '^(%d+) (%d+) (%d+) (%d+) (%-?%d+) (%-?%d+)$')
    if not T then return nil end
    T, U, w = tonumber(T), tonumber(U), tonumber(w)
    return {T = T, R = tonumber(R), U = U, n = tonumber(n), w = w, held = tonumber(h), H = w * U}
  end

  -- encode is the stored form of held ticks at now with params p and latest
  -- take H (microseconds; nil: none, stored as 0).
  local function encode(p, held, H)
    return struct.pack('<Bddddddd', 2, p.T, p.R, p.U, p.n, math.floor(now_us / p.U), held, H or 0)
  end

  local orig = {}
  local function original(key)
    local o = orig[key]
    if o == nil then
      o = false
      local v = redis.call('GET', key)
      if v then
        o = decode(v)
        if not o then
          return redis.error_reply('sluice: key ' .. key .. ' does not hold a sluice bucket')
        end
      end
      orig[key] = o
    end
    return o
  end

  -- fresh returns the held ticks of key at now as params q, from the state
  -- before this call, whether that differs from what is stored, and the
  -- bucket's latest take (nil: none).
  local function fresh(key, q)
    local o = original(key)
    if type(o) == 'table' and o.err then return nil, o end
    if not o then return q.n * q.T, false end
    local h = refill(o)
    if same(o, q) then return h, false, o.H end
    return convert(o, h, q), true, o.H
  end

  local work = {}
  local function state(key, q, w)
    w = w or work
    local s = w[key]
    if s then
      if not same(s.p, q) then
        s.held = convert(s.p, s.held, q)
        s.p = q
        s.dirty = true
      end
      return s
    end
    local h, changed, H = fresh(key, q)
    if h == nil then return nil, changed end
    s = {p = q, held = h, dirty = changed, H = H}
    w[key] = s
    return s
  end

  local function commit(w)
    for key, s in pairs(w) do
      if s.dirty then
        local p = s.p
        local tau = p.n * p.T
        if s.held >= tau and p.R == 0 then
          redis.call('DEL', key) -- full at every instant: nothing to keep
        else
          if s.held > tau then s.held = tau end -- full from now on, not before
          local v = encode(p, s.held, s.H)
          if p.R > 0 then
            redis.call('SET', key, v, 'PX', ms(math.ceil(math.ceil((tau - s.held) / p.R) * p.U / 1000) + 1000))
          else
            redis.call('SET', key, v)
          end
        end
      end
    end
  end

  -- try takes cost tokens from h ticks: 0, new held | 1 (no refill) |
  -- 2, overburst flag (cost above the burst) | 3, retry in microseconds.
  local function try(h, q, cost)
    if cost <= 0 then
      -- a check, nothing to take: it passes only while the bucket holds a
      -- whole token; empty or in debt, it refuses until one has refilled
      -- (package bucket's rule for n <= 0)
      if h >= q.T then return 0, h end
      if q.R == 0 or q.n == 0 then return 1 end
      return 3, math.ceil((q.T - h) / q.R) * q.U
    end
    if cost > q.n then return 2, q.n > 0 end
    local need = cost * q.T
    if h >= need then return 0, h - need end
    if q.R == 0 then return 1 end
    return 3, math.ceil((need - h) / q.R) * q.U
  end

  -- took records that a take or a forced charge on s happened now: H, the
  -- latest such instant, bounds later give-backs.
  local function took(s)
    if not s.H or s.H < now_us then s.H = now_us end
  end

  -- take evaluates one decision of nops ops (general path).
  local function take(nops)
    orig, work = {}, {}
    local rem = {}
    local shadowed = {}
    local slots = {}
    for i = 1, nops do
      local q, cost, shadow = op(i)
      local s, st, v
      if q.T == 0 then
        st, v = slot(KEYS[KO + i], q)
      else
        local err
        s, err = state(KEYS[KO + i], q)
        if not s then return err end
        st, v = try(s.held, q, cost)
      end
      if st == 0 and q.T == 0 then
        slots[#slots + 1] = i
        rem[i] = v
      elseif st == 0 then
        if cost > 0 then
          s.held = v
          s.dirty = true
          took(s)
        end
        rem[i] = math.floor(v / q.T)
      elseif shadow then
        shadowed[#shadowed + 1] = i - 1
        rem[i] = 0
        if s then rem[i] = math.floor(s.held / q.T) end -- what it holds: nothing was taken
      else
        local perm, over, retry = false, false, 0
        if st == 1 then
          perm = true
        elseif st == 2 then
          perm, over = true, v
        else
          retry = v
        end
        -- The wait after which all ops would pass: probe the later ones
        -- against the state before this call (nothing is taken).
        local touched = {}
        for k = 1, i do
          if op(k).T ~= 0 then touched[#touched + 1] = k end
        end
        for j = i + 1, nops do
          if perm then break end
          local qj, cj, sj = op(j)
          if not sj and qj.T ~= 0 then -- a probe cannot tell when a slot frees
            touched[#touched + 1] = j
            local hj, e = fresh(KEYS[KO + j], qj)
            if hj == nil then return e end
            local stj, vj = try(hj, qj, cj)
            if stj == 1 then
              perm, over, retry = true, false, 0
            elseif stj == 2 then
              perm, over, retry = true, vj, 0
            elseif stj == 3 and vj > retry then
              retry = vj
            end
          end
        end
        -- Nothing is taken, but a bucket whose rate or burst changed keeps
        -- its new parameters (as bucket.Reconfigure would have it).
        local conv = {}
        for _, k in ipairs(touched) do
          local qk = op(k)
          local sk, e = state(KEYS[KO + k], qk, conv)
          if not sk then return e end
        end
        commit(conv)
        local out = {i - 1, retry, perm and 1 or 0, over and 1 or 0, #shadowed}
        for _, x in ipairs(shadowed) do out[#out + 1] = x end
        return out
      end
    end
    commit(work)
    for _, i in ipairs(slots) do
      local q = op(i)
      redis.call('ZADD', KEYS[KO + i], now_us + q.ttl, q.lease)
      redis.call('PEXPIRE', KEYS[KO + i], math.ceil(q.ttl / 1000) + 1000)
    end
    local out = {-1, 0, 0, 0, #shadowed}
    for _, x in ipairs(shadowed) do out[#out + 1] = x end
    for i = 1, nops do out[#out + 1] = rem[i] end
    return out
  end

  return take, op, state, commit, took, work
end

if mode == 'm' then
  -- a batch: ARGV[3] decisions, each a count c then c ops; the reply is
  -- each decision's reply prefixed by its length, except that a decision
  -- of one op that is admitted is the single element -1 - remaining (below
  -- 0, unlike a length). Decisions are evaluated in order, each seeing the
  -- ones before it.
  local D = tonumber(ARGV[3])
  local res, nres = {}, 0
  KO, AO = 0, 3
  cache = {}
  local take

  -- flush writes the changed buckets of the cache. (A list of the keys
  -- in the order they came, instead of pairs, would cost more: each
  -- table that grows is rehashed at every power of two.)
  local function flush()
    for k, c in pairs(cache) do
      if c[7] then put(k, c[1], c[2], c[3], c[4], c[5], c[6]) end
    end
  end

  -- one takes the single op of a batch's decision at KEYS[KO + 1] and
  -- ARGV[AO + 1 ...] when the bucket is missing, stored with the op's
  -- parameters or in the batch's cache, and the take is admitted, with no
  -- table but the bucket's cache entry; it returns what the bucket then
  -- holds, in tokens. Anything else (a shadow op, a check, a slot, a denial,
  -- another stored form) returns nil with nothing taken, for fast, which
  -- finds in the cache what this read.
  local function one()
    if ARGV[AO + 6] ~= '0' or ARGV[AO + 1] == '0' then return nil end
    local T, R, U, n = ARGV[AO + 1] + 0, ARGV[AO + 2] + 0, ARGV[AO + 3] + 0, ARGV[AO + 4] + 0
    local cost = ARGV[AO + 5] + 0
    if cost <= 0 or cost > n then return nil end
    local k = KEYS[KO + 1]
    local c = cache[k]
    if c then
      if c[1] ~= T or c[2] ~= R or c[3] ~= U or c[4] ~= n then return nil end
    else
      local tau = n * T
      local h, H = tau, false
      local v = call('GET', k)
      if v then
        local f, sT, sR, sU, sn, w, sh, sH
        if #v == 57 then f, sT, sR, sU, sn, w, sh, sH = struct.unpack('<Bddddddd', v) end
        if f ~= 2 or sT ~= T or sR ~= R or sU ~= U or sn ~= n then return nil end
        h, H = sh, sH
        if R > 0 then h = h + ((now_us - now_us % U) / U - w) * R end
        if h > tau then h = tau elseif h < -MAXDEBT then h = -MAXDEBT end
      end
      c = {T, R, U, n, h, H, false}
      cache[k] = c
    end
    local held = c[5] - cost * T
    if held < 0 then return nil end
    local H = c[6]
    if not H or H < now_us then H = now_us end -- this take is the latest
    c[5], c[6], c[7] = held, H, true
    return (held - held % T) / T
  end

  for _ = 1, D do
    local c = ARGV[AO + 1]
    if c == '1' then c = 1 else c = c + 0 end -- the commonest count, not converted
    AO = AO + 1
    local r
    if c == 1 then r = one() end
    if r then
      -- a one-op decision admitted: one element, -1 - remaining (the
      -- client reads it as {-1, remaining})
      nres = nres + 1
      res[nres] = -1 - r
    else
      local out = fast(c)
      if not out then
        flush() -- the general path reads and writes Redis itself
        cache = {}
        if not take then take = general() end
        out = take(c)
      end
      if out.err then return out end
      local m = #out
      res[nres + 1] = m
      for j = 1, m do res[nres + 1 + j] = out[j] end
      nres = nres + 1 + m
    end
    KO = KO + c
    AO = AO + c * NF
  end
  flush()
  return res
end

local take, op, state, commit, took, work = general()
local nops = #KEYS
if mode == 'c' then
  nops = nops - 1 -- the last key is the probe key
  -- pay: charge what was decided locally, down to zero at most (a bucket
  -- already in debt keeps its debt)
  for i = 1, nops do
    local q, cost = op(i)
    local s, err = state(KEYS[i], q)
    if not s then return err end
    if cost > 0 then
      local h = math.min(s.held, q.n * q.T)
      s.held = math.max(h - cost * q.T, math.min(h, 0))
      s.dirty = true
      took(s)
    end
  end
  commit(work)
  -- the probe write: fails as a decision would on a server that cannot
  -- take writes
  redis.call('SET', KEYS[nops + 1], '1', 'PX', 1000)
  return 0
end
if mode == 'a' then
  for i = 1, nops do
    local q, cost = op(i)
    if q.T == 0 then
      -- a connections slot: a negative cost releases the lease
      if cost < 0 then redis.call('ZREM', KEYS[i], q.lease) end
    else
      local s, err = state(KEYS[i], q)
      if not s then return err end
      local tau = q.n * q.T
      if cost > 0 then
        s.held = math.max(math.min(s.held, tau) - cost * q.T, -MAXDEBT)
        s.dirty = true
        took(s)
      elseif cost < 0 then
        -- a give-back, bounded by the refill since the take it undoes
        -- (at a) up to the latest take (H): see the top of this file
        local d = -cost * q.T
        local a = tonumber(ARGV[AO + (i - 1) * NF + 6])
        local c = math.max(tonumber(ARGV[AO + (i - 1) * NF + 7]) or 0, -cost)
        if ARGV[2] == '' then a = now_us - a end
        if s.H and q.R > 0 and a then
          local lag = math.floor(s.H / q.U) - math.floor(a / q.U)
          if lag > 0 then d = math.min(d, c * q.T - lag * q.R) end
        elseif not a then
          d = 0
        end
        -- A bucket already full now (refilled) is left as stored: it has
        -- been full since an instant its stored state keeps, and a caller
        -- with an older instant sees it as it was then. Storing it full
        -- now would take from such a caller what it had before this
        -- give-back; nothing given back can add to a full bucket anyway.
        if d > 0 and s.held < tau then
          s.held = math.min(s.held + d, tau)
          s.dirty = true
        end
      end
    end
  end
  commit(work)
  return 0
end

return take(nops) -- fast declined above
