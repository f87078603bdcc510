package sim

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	mserver "github.com/alicebob/miniredis/v2/server"
	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// The simulated server runs EVAL and EVALSHA itself, on Lua states that
// it reuses, rather than through miniredis, which builds a new state (its
// libraries, its globals) for every script run: that was most of the
// simulator's time. A script sees what Redis 7 gives it: the base,
// string, math and table libraries; KEYS and ARGV; redis.call, pcall,
// error_reply, status_reply and sha1hex; globals that it may read but not
// create. Each command a script calls is one command of the miniredis
// store, through the server's front (TIME, INFO, LASTSAVE, PUBLISH), and
// its reply reaches the script converted as Redis converts it.

// A luaVM is a Lua state with the redis library, reused from one script
// run to the next. While it runs a script it belongs to one server, whose
// mu is held.
type luaVM struct {
	L        *lua.LState
	s        *server
	db       int
	noWrites bool // the script runs with flags=no-writes
}

var (
	vms    = sync.Pool{New: func() any { return newLuaVM() }}
	protos sync.Map // script source → *compiled
)

// compiled is a script compiled once, and its SHA-1.
type compiled struct {
	proto    *lua.FunctionProto
	sha      string
	noWrites bool // the script's shebang line has flags=no-writes
}

// newLuaVM builds a state with the libraries Redis gives a script.
func newLuaVM() *luaVM {
	vm := &luaVM{L: lua.NewState(lua.Options{SkipOpenLibs: true})}
	L := vm.L
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath},
	} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	// What Redis removes from the base library.
	for _, name := range []string{"dofile", "loadfile", "load", "loadstring", "require", "module", "print", "collectgarbage", "getfenv", "setfenv", "newproxy", "_printregs"} {
		L.SetGlobal(name, lua.LNil)
	}
	redis := L.NewTable()
	L.SetFuncs(redis, map[string]lua.LGFunction{
		"call":  func(L *lua.LState) int { return vm.call(L, true) },
		"pcall": func(L *lua.LState) int { return vm.call(L, false) },
		"error_reply": func(L *lua.LState) int {
			L.Push(statusTable(L, "err", strings.TrimPrefix(L.CheckString(1), "-")))
			return 1
		},
		"status_reply": func(L *lua.LState) int {
			L.Push(statusTable(L, "ok", L.CheckString(1)))
			return 1
		},
		"sha1hex": func(L *lua.LState) int {
			sum := sha1.Sum([]byte(L.CheckString(1)))
			L.Push(lua.LString(hex.EncodeToString(sum[:])))
			return 1
		},
		"log": func(L *lua.LState) int { return 0 },
	})
	L.SetGlobal("redis", redis)
	L.SetGlobal("server", redis)
	// Globals: a script may read the ones there are (and KEYS, ARGV),
	// and may neither create one nor read one that is not there.
	g := L.Get(lua.GlobalsIndex).(*lua.LTable)
	meta := L.NewTable()
	meta.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Attempt to modify a readonly table")
		return 0
	}))
	meta.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Script attempted to access nonexistent global variable '%s'", L.CheckString(2))
		return 0
	}))
	L.SetMetatable(g, meta)
	return vm
}

func statusTable(L *lua.LState, field, msg string) *lua.LTable {
	t := L.CreateTable(0, 1)
	t.RawSetString(field, lua.LString(msg))
	return t
}

// compile returns the compiled form of src, compiled once per source.
func compile(src string) (*compiled, error) {
	if c, ok := protos.Load(src); ok {
		return c.(*compiled), nil
	}
	// A first line "#!lua flags=..." declares the script's flags (Redis
	// 7); the Lua source begins on the next line, and keeps its numbers.
	body, noWrites := src, false
	if rest, ok := strings.CutPrefix(src, "#!"); ok {
		first, _, _ := strings.Cut(rest, "\n")
		fields := strings.Fields(first)
		if len(fields) == 0 || fields[0] != "lua" {
			return nil, errors.New("unexpected engine in script shebang")
		}
		for _, f := range fields[1:] {
			if flags, ok := strings.CutPrefix(f, "flags="); ok {
				noWrites = slices.Contains(strings.Split(flags, ","), "no-writes")
			}
		}
		body = "\n" + src[len("#!")+len(first)+min(1, len(rest)-len(first)):]
	}
	chunk, err := parse.Parse(strings.NewReader(body), "@user_script")
	if err != nil {
		return nil, err
	}
	p, err := lua.Compile(chunk, "@user_script")
	if err != nil {
		return nil, err
	}
	sum := sha1.Sum([]byte(src))
	c := &compiled{proto: p, sha: hex.EncodeToString(sum[:]), noWrites: noWrites}
	protos.Store(src, c)
	return c, nil
}

// eval runs EVAL or EVALSHA (args without the command's name) on database
// db; s.mu is held. It returns the reply as dispatch does.
func (s *server) eval(db int, sha bool, args []string) reply {
	if len(args) < 2 {
		return reply{err: "ERR wrong number of arguments for 'eval' command"}
	}
	n, err := strconv.Atoi(args[1])
	switch {
	case err != nil:
		return reply{err: "ERR value is not an integer or out of range"}
	case n < 0:
		return reply{err: "ERR Number of keys can't be negative"}
	case n > len(args)-2:
		return reply{err: "ERR Number of keys can't be greater than number of args"}
	}
	c := s.scripts[strings.ToLower(args[0])]
	switch {
	case sha && c == nil:
		return reply{err: "NOSCRIPT No matching script. Please use EVAL."}
	case !sha:
		if c, err = compile(args[0]); err != nil {
			return reply{err: "ERR Error compiling script (new function): " + err.Error()}
		}
		if s.scripts == nil {
			s.scripts = make(map[string]*compiled)
		}
		s.scripts[c.sha] = c
	}
	vm := vms.Get().(*luaVM)
	defer vms.Put(vm)
	vm.s, vm.db, vm.noWrites = s, db, c.noWrites
	defer func() { vm.s = nil }()
	L := vm.L
	g := L.Get(lua.GlobalsIndex).(*lua.LTable)
	keys, argv := L.CreateTable(n, 0), L.CreateTable(len(args)-2-n, 0)
	for _, k := range args[2 : 2+n] {
		keys.Append(lua.LString(k))
	}
	for _, a := range args[2+n:] {
		argv.Append(lua.LString(a))
	}
	g.RawSetString("KEYS", keys)
	g.RawSetString("ARGV", argv)
	L.SetTop(0)
	L.Push(L.NewFunctionFromProto(c.proto))
	err = L.PCall(0, 1, nil)
	defer L.SetTop(0)
	if err != nil {
		var api *lua.ApiError
		if errors.As(err, &api) {
			if t, ok := api.Object.(*lua.LTable); ok {
				if e, ok := t.RawGetString("err").(lua.LString); ok {
					return reply{err: string(e)}
				}
			}
			return reply{err: "ERR user_script: " + api.Object.String()}
		}
		return reply{err: "ERR " + err.Error()}
	}
	s.writes++
	return fromLua(L.Get(1))
}

// fromLua converts a script's return value to a reply as Redis does: a
// number to an integer (truncated), a string to a bulk string, true to 1,
// false and nil to nil, a table with err or ok to an error or a status,
// any other table to an array up to its first nil.
func fromLua(v lua.LValue) reply {
	switch v := v.(type) {
	case lua.LNumber:
		return reply{val: int64(v)}
	case lua.LString:
		return reply{val: string(v)}
	case lua.LBool:
		if v {
			return reply{val: int64(1)}
		}
		return reply{}
	case *lua.LTable:
		if e, ok := v.RawGetString("err").(lua.LString); ok {
			return reply{err: string(e)}
		}
		if s, ok := v.RawGetString("ok").(lua.LString); ok {
			return reply{val: string(s)}
		}
		out := []any{}
		for i := 1; ; i++ {
			e := v.RawGetInt(i)
			if e == lua.LNil {
				break
			}
			r := fromLua(e)
			if r.err != "" {
				out = append(out, errors.New(r.err))
				continue
			}
			out = append(out, r.val)
		}
		return reply{val: out}
	}
	return reply{}
}

// call is redis.call (raise: an error reply raises it) and redis.pcall (an
// error reply is returned as a table with err).
func (vm *luaVM) call(L *lua.LState, raise bool) int {
	n := L.GetTop()
	if n == 0 {
		L.RaiseError("Please specify at least one argument for this redis lib call")
		return 0
	}
	args := make([]string, n)
	for i := 1; i <= n; i++ {
		switch a := L.Get(i).(type) {
		case lua.LString:
			args[i-1] = string(a)
		case lua.LNumber:
			// Redis formats a Lua number as %.17g.
			args[i-1] = strconv.FormatFloat(float64(a), 'g', 17, 64)
		default:
			L.RaiseError("Lua redis lib command arguments must be strings or integers")
			return 0
		}
	}
	switch strings.ToUpper(args[0]) {
	case "EVAL", "EVALSHA", "MULTI", "EXEC", "SUBSCRIBE", "WATCH", "SELECT":
		return vm.fail(L, raise, "ERR This Redis command is not allowed from script")
	}
	if vm.noWrites && !vm.s.reads(args[0]) {
		return vm.fail(L, raise, "ERR Write commands are not allowed from read-only scripts.")
	}
	r, err := vm.s.do(vm.db, args)
	if err != nil {
		return vm.fail(L, raise, strings.TrimSpace(err.Error()))
	}
	L.Push(toLua(L, r))
	return 1
}

func (vm *luaVM) fail(L *lua.LState, raise bool, msg string) int {
	t := statusTable(L, "err", msg)
	if raise {
		L.Error(t, 0)
		return 0
	}
	L.Push(t)
	return 1
}

// toLua converts a parsed reply to what a script sees: an integer to a
// number, a bulk string to a string, nil to false, an array to a table, a
// status to a table with ok, an error inside an array to a table with err.
func toLua(L *lua.LState, r any) lua.LValue {
	switch r := r.(type) {
	case nil:
		return lua.LFalse
	case int:
		return lua.LNumber(r)
	case int64:
		return lua.LNumber(r)
	case []byte:
		return lua.LString(r)
	case string:
		return lua.LString(r)
	case mserver.Simple:
		return statusTable(L, "ok", string(r))
	case error:
		return statusTable(L, "err", r.Error())
	case []any:
		t := L.CreateTable(len(r), 0)
		for _, e := range r {
			t.Append(toLua(L, e))
		}
		return t
	}
	panic(fmt.Sprintf("sim: reply of type %T", r))
}

// reads reports whether cmd may run in a script with flags=no-writes: a
// command that miniredis marks read-only, or one the server's front
// answers (TIME, INFO, LASTSAVE, PUBLISH), none of which writes.
func (s *server) reads(cmd string) bool {
	switch strings.ToUpper(cmd) {
	case "TIME", "INFO", "LASTSAVE", "PUBLISH":
		return true
	}
	return s.m.Server().IsReadOnlyCommand(cmd)
}
