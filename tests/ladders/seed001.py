"""The YAML examples of seed 001 (memory stack guide), copied verbatim."""

RESOURCES = """\
resources:
  memories:
    kind: memory.Assembly
    impl: mymemory        # app-registered implementation; name is yours
    deps:
      workspace: ws/project
      inference: infer
    settings:
      file: ./memory.yaml
"""

PREPARE = """\
agents:
  assistant:
    prepare:
      - type: memory.context
        deps:
          memory: memories
        settings:
          query:
            literal: "relevant prior conversation"  # or board / current_message / recent_only
          scope:
            runtime_id: memories
            user_id: user-1
            agent_id: assistant
          conversation_id: conv-1        # optional; defaults to the request ContextID
          dataset_ids: [docs]            # optional
          budget: {max_tokens: 2000, max_items: 50, max_chars: 8000}  # optional
          min_score: 0.5                 # optional; [0, 1]
          output: memory_items           # required; non-reserved board var
          render:
            output: memory_text          # must differ from output
            gotmpl: {template: "\\n", max_chars: 8000}
"""

COMMIT = """\
agents:
  assistant:
    commit:
      - type: memory.turn
        deps:
          memory: memories
        settings:
          scope:
            runtime_id: memories
            user_id: user-1
            agent_id: assistant
          conversation_id: conv-1   # optional; defaults to the request ContextID
          channel: __main_channel   # optional; defaults to the main channel
"""
