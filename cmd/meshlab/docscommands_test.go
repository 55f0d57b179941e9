package main

import (
	"bufio"
	"os"
	"strings"
	"testing"
	"unicode"

	"github.com/spf13/cobra"
)

// TestDocsCommandsParse holds meshlab's verbs and flags to the command lines of Istio's
// task pages (testdata/docs_commands.txt): each, with kubectl or istioctl replaced by
// meshlab, must name one of meshlab's commands and parse with its flags, or be listed as
// one that differs, with why: the refusal meshlab prints when a user types it
// (refusals.go), word for word. It checks the surface, not behaviour: the docs walks in
// e2e/docs_*_test.go run the pages.
func TestDocsCommandsParse(t *testing.T) {
	t.Parallel()
	f, err := os.Open("testdata/docs_commands.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		text, why, differs := strings.Cut(text, "# differs: ")
		words := shellWords(strings.TrimSpace(text))
		if len(words) == 0 || (words[0] != "kubectl" && words[0] != "istioctl") {
			t.Errorf("line %d: %q is not a kubectl or istioctl command", line, text)
			continue
		}
		n++
		args := namespaceFirst(words[1:])
		err := parseCommandLine(args)
		switch {
		case differs && err == nil:
			t.Errorf("line %d: %s now parses; drop its \"differs: %s\"", line, text, why)
		case differs && explainRefusal(args, err).Error() != strings.TrimSpace(why):
			t.Errorf("line %d: %s: meshlab says %q, where the line says why it differs: %q", line, text, explainRefusal(args, err), why)
		case !differs && err != nil:
			t.Errorf("line %d: %s: %v", line, text, err)
		}
	}
	if err := sc.Err(); err != nil || n == 0 {
		t.Fatalf("read %d commands: %v", n, err)
	}
}

// parseCommandLine finds args' command in meshlab's tree and parses its flags, as
// Execute would before running it; for install, it also reads the --set values as
// install does first.
func parseCommandLine(args []string) error {
	root := newRootCmd()
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if cmd == root {
		return errUnknownVerb(args)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return err
	}
	if cmd.Args != nil {
		if err := cmd.Args(cmd, cmd.Flags().Args()); err != nil {
			return err
		}
	}
	if cmd == installCmd(root) {
		// install's --set values are read before it touches the lab: what it refuses
		// there, it refuses for any lab (-f's files are the pages' own, not here).
		sets, err := cmd.Flags().GetStringArray("set")
		if err != nil {
			return err
		}
		_, err = readInstall(sets, nil)
		return err
	}
	return nil
}

// installCmd is root's install command.
func installCmd(root *cobra.Command) *cobra.Command {
	cmd, _, _ := root.Find([]string{"install"})
	return cmd
}

type errUnknownVerb []string

func (e errUnknownVerb) Error() string { return "no meshlab command " + strings.Join(e, " ") }

// shellWords splits a command line as a POSIX shell would for these lines: words
// separated by blanks, quotes ('...' as is, "..." as is but for the quotes) removed.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case unicode.IsSpace(r):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
