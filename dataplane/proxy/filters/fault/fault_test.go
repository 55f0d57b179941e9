package fault

import (
	"strings"
	"testing"
	"time"

	faultcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestDecideHonoursFractionalPercentages(t *testing.T) {
	c, err := CompileProto(&faultv3.HTTPFault{
		Delay: &faultcommonv3.FaultDelay{FaultDelaySecifier: &faultcommonv3.FaultDelay_FixedDelay{FixedDelay: durationpb.New(2 * time.Second)},
			Percentage: &typev3.FractionalPercent{Numerator: 100}},
		Abort: &faultv3.FaultAbort{ErrorType: &faultv3.FaultAbort_HttpStatus{HttpStatus: 503},
			Percentage: &typev3.FractionalPercent{Numerator: 1000, Denominator: typev3.FractionalPercent_TEN_THOUSAND}},
	})
	if err != nil {
		t.Fatal(err)
	}
	aborts := 0
	for i := 0; i < 10000; i++ {
		d := c.Decide()
		if d.Delay != 2*time.Second {
			t.Fatal("delay at 100% not injected")
		}
		if d.AbortStatus == 503 {
			aborts++
		}
	}
	if aborts < 850 || aborts > 1150 {
		t.Errorf("abort 10%% (1000/10000) injected %d of 10000", aborts)
	}
	if d := (&Config{}).Decide(); d != (Decision{}) {
		t.Errorf("empty config injected %+v", d)
	}
}

func TestCompileRefusesUnimplementedFaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    *faultv3.HTTPFault
		want string
	}{
		{"header delay", &faultv3.HTTPFault{Delay: &faultcommonv3.FaultDelay{FaultDelaySecifier: &faultcommonv3.FaultDelay_HeaderDelay_{HeaderDelay: &faultcommonv3.FaultDelay_HeaderDelay{}}}},
			"delay.header_delay: field is not supported"},
		{"grpc abort", &faultv3.HTTPFault{Abort: &faultv3.FaultAbort{ErrorType: &faultv3.FaultAbort_GrpcStatus{GrpcStatus: 14}}}, "abort.grpc_status: field is not supported"},
		{"max active faults", &faultv3.HTTPFault{MaxActiveFaults: wrapperspb.UInt32(1)}, "max_active_faults: field is not supported"},
		{"upstream cluster", &faultv3.HTTPFault{UpstreamCluster: "x"}, "upstream_cluster: field is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := CompileProto(tc.f); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
