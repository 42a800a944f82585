package record

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/dal-runtime/dal/internal/marks"
	"github.com/dal-runtime/dal/internal/netcap"
	"github.com/dal-runtime/dal/internal/netcap/har"
)

// ownHooks are the proxy hooks the recording's options ask for, after the
// caller's (NetworkOptions.Before): the strict-mode LLM refusal, then the
// before_external_call checkpoint, which a refused request never reaches.
func (r *recording) ownHooks() []func(context.Context, *har.Exchange) *netcap.Answer {
	var hooks []func(context.Context, *har.Exchange) *netcap.Answer
	if r.o.EnforceStrictLLM {
		hooks = append(hooks, StrictLLMRefusal)
	}
	if r.o.CheckpointCalls {
		dir := filepath.Join(r.stage, "auto")
		if err := os.Mkdir(dir, 0o700); err != nil {
			fmt.Fprintf(r.spec.Log, "dal: no before_external_call checkpoints: %v\n", err)
			return hooks
		}
		r.auto = dir
		hooks = append(hooks, r.checkpointCall)
	}
	return hooks
}

// checkpointCall writes a checkpoint mark for a request the proxy is about
// to forward into dal's own marks directory (never the agent's, which the
// agent controls): named before_external_call, its state the method and
// the URL without its query (which may hold credentials). It never
// answers: the request goes on.
func (r *recording) checkpointCall(_ context.Context, x *har.Exchange) *netcap.Answer {
	target := x.Request.URL
	if u, err := url.Parse(target); err == nil {
		target = u.Scheme + "://" + u.Host + u.Path
	}
	state, _ := json.Marshal(map[string]string{"auto": "before_external_call", "method": x.Request.Method, "url": target})
	_, err := marks.Write(r.auto, marks.Input{Kind: marks.Checkpoint, Name: "before_external_call", State: state,
		Note: x.Request.Method + " " + target, Runtime: "dal", PID: os.Getpid(), AtNS: time.Now().UnixNano(), Cwd: r.auto})
	if err != nil {
		fmt.Fprintf(r.spec.Log, "dal: the before_external_call checkpoint of %s %s was not written: %v\n", x.Request.Method, target, err)
	}
	return nil
}
