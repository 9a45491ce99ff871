// Command linefixture is the engine tests' container program: with no
// arguments it echoes each stdin line to stdout, and "stderr X" writes X to
// stderr, "exit N" exits with status N; with arguments it prints them and
// what it reads from stdin ("args a b" -> "a b|<stdin>") and exits with the
// status named by $EXIT (default 0). With $WRITE set it writes stdin to
// that file instead, and with $READ it prints that file (exit 1 on error).
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

func main() {
	if f := os.Getenv("WRITE"); f != "" {
		in, _ := io.ReadAll(os.Stdin)
		if err := os.WriteFile(f, in, 0o644); err != nil {
			fmt.Fprint(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if f := os.Getenv("READ"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprint(os.Stderr, err)
			os.Exit(1)
		}
		os.Stdout.Write(b)
		return
	}
	if len(os.Args) > 1 {
		in, _ := io.ReadAll(os.Stdin)
		fmt.Printf("%s|%s", strings.Join(os.Args[1:], " "), in)
		fmt.Fprint(os.Stderr, "to-stderr")
		code, _ := strconv.Atoi(os.Getenv("EXIT"))
		os.Exit(code)
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "stderr "):
			fmt.Fprintln(os.Stderr, strings.TrimPrefix(line, "stderr "))
		case strings.HasPrefix(line, "exit "):
			code, _ := strconv.Atoi(strings.TrimPrefix(line, "exit "))
			os.Exit(code)
		default:
			fmt.Println(line)
		}
	}
}
