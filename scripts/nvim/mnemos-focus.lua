-- mnemos focus telemetry for Neovim (0.7 or later).
--
-- Tells the mnemos daemon where you are: whenever you enter a buffer, move the cursor or focus
-- Neovim, it sends one UDP datagram to the daemon (loopback only, fire-and-forget through libuv,
-- never blocking the editor):
--
--   {"file":"/abs/path.ts","line":12,"col":5,"session":"nvim-4242","server":"/run/user/1000/nvim.4242.0"}
--
-- line and col are 1-based (col counts bytes, like col('.')). `server` is this instance's RPC
-- address (v:servername): with it, the daemon's nvim_* tools talk to the Neovim you used last.
-- Cursor moves are coalesced: at most one datagram per `vim.g.mnemos_focus_delay_ms`.
--
-- Install: copy this file to ~/.config/nvim/plugin/mnemos-focus.lua (or `:luafile` it).
-- Settings (set before it loads):
--   vim.g.mnemos_udp_host = "127.0.0.1"   -- the daemon's UDP host
--   vim.g.mnemos_udp_port = 7438          -- the daemon's --udp-port (default: its HTTP port + 1)
--   vim.g.mnemos_focus_delay_ms = 150
--   vim.g.mnemos_focus_disabled = true    -- turn it off

if vim.g.mnemos_focus_loaded or vim.g.mnemos_focus_disabled then return end
vim.g.mnemos_focus_loaded = true

local uv = vim.loop
local host = vim.g.mnemos_udp_host or "127.0.0.1"
local port = tonumber(vim.g.mnemos_udp_port) or 7438
local delay_ms = tonumber(vim.g.mnemos_focus_delay_ms) or 150
local datagram_bytes_max = 8 * 1024 -- the daemon drops anything larger
local session = "nvim-" .. vim.fn.getpid()

local socket = uv.new_udp()
local timer = uv.new_timer()
local last_sent = nil

local function server_address()
  if vim.v.servername == nil or vim.v.servername == "" then pcall(vim.fn.serverstart) end
  return vim.v.servername
end

local function focus_payload()
  local buf = vim.api.nvim_get_current_buf()
  if vim.bo[buf].buftype ~= "" then return nil end
  local file = vim.api.nvim_buf_get_name(buf)
  if file == "" then return nil end
  local cursor = vim.api.nvim_win_get_cursor(0)
  local payload = vim.fn.json_encode({
    file = file,
    line = cursor[1],
    col = cursor[2] + 1,
    session = session,
    server = server_address(),
  })
  if #payload > datagram_bytes_max then return nil end
  return payload
end

local function send_now()
  local ok, payload = pcall(focus_payload)
  if not ok or payload == nil or payload == last_sent then return end
  last_sent = payload
  socket:send(payload, host, port, function() end) -- fire and forget: errors are ignored
end

local function send_soon()
  timer:stop()
  timer:start(delay_ms, 0, vim.schedule_wrap(send_now))
end

local group = vim.api.nvim_create_augroup("MnemosFocus", { clear = true })
vim.api.nvim_create_autocmd({ "BufEnter", "WinEnter", "FocusGained" }, {
  group = group,
  callback = function()
    last_sent = nil -- entering or focusing always reports, even at the same place
    send_soon()
  end,
})
vim.api.nvim_create_autocmd({ "CursorMoved", "CursorMovedI" }, { group = group, callback = send_soon })
vim.api.nvim_create_autocmd("VimLeavePre", {
  group = group,
  callback = function()
    timer:stop()
    timer:close()
    socket:close()
  end,
})

send_soon()
