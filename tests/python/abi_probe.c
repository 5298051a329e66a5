/*
 * abi_probe.c - print sizeof and every field's offset of ember.h's public
 * structs, one "struct size" and "struct.field offset" per line: what
 * test_abi.py compares the Python binding's ctypes mirrors with.
 */
#include <stddef.h>
#include <stdio.h>

#include <ember/ember.h>

#define S(t) printf("%s %zu\n", #t, sizeof(t))
#define F(t, f) printf("%s.%s %zu\n", #t, #f, offsetof(t, f))

int main(void) {
  S(ember_options);
  F(ember_options, size); F(ember_options, client_name);
  F(ember_options, embedded_threads); F(ember_options, connect_timeout_ms);
  F(ember_options, no_fallback); F(ember_options, max_frame);
  F(ember_options, plugin_dir);
  F(ember_options, reconnect_window_ms);

  S(ember_task_info);
  F(ember_task_info, size); F(ember_task_info, platform);
  F(ember_task_info, platform_kind); F(ember_task_info, fell_back);
  F(ember_task_info, queue_ns); F(ember_task_info, exec_ns);
  F(ember_task_info, server_ns); F(ember_task_info, round_trip_ns);
  F(ember_task_info, stage_in_ns); F(ember_task_info, stage_out_ns);
  F(ember_task_info, attempts);

  S(ember_submit_options);
  F(ember_submit_options, size); F(ember_submit_options, priority);
  F(ember_submit_options, platform); F(ember_submit_options, prefer);
  F(ember_submit_options, callback); F(ember_submit_options, user);
  F(ember_submit_options, states); F(ember_submit_options, n_states);
  F(ember_submit_options, outputs); F(ember_submit_options, n_outputs);

  S(ember_sw_params);
  F(ember_sw_params, size); F(ember_sw_params, alphabet);
  F(ember_sw_params, match); F(ember_sw_params, mismatch);
  F(ember_sw_params, matrix); F(ember_sw_params, gap_open);
  F(ember_sw_params, gap_extend); F(ember_sw_params, platform);
  F(ember_sw_params, prefer); F(ember_sw_params, pairs_per_task);

  S(ember_seq);
  F(ember_seq, residues); F(ember_seq, length);

  S(ember_sw_result);
  F(ember_sw_result, score); F(ember_sw_result, query_start);
  F(ember_sw_result, query_end); F(ember_sw_result, ref_start);
  F(ember_sw_result, ref_end);

  S(ember_sw_report);
  F(ember_sw_report, size); F(ember_sw_report, tasks);
  F(ember_sw_report, tasks_fallback); F(ember_sw_report, tasks_cpu);
  F(ember_sw_report, tasks_opencl); F(ember_sw_report, tasks_fpga_emu);
  F(ember_sw_report, tasks_retried); F(ember_sw_report, cells);
  F(ember_sw_report, queue_ns); F(ember_sw_report, exec_ns);
  F(ember_sw_report, server_ns); F(ember_sw_report, round_trip_ns);
  F(ember_sw_report, wall_ns);
  F(ember_sw_report, tasks_failed);
  F(ember_sw_report, pairs_failed);

  S(ember_lnl_params);
  F(ember_lnl_params, size); F(ember_lnl_params, precision);
  F(ember_lnl_params, max_vectors); F(ember_lnl_params, threads);
  F(ember_lnl_params, platform); F(ember_lnl_params, site_lnl);
  F(ember_lnl_params, tree_cb); F(ember_lnl_params, tree_user);
  F(ember_lnl_params, instances);

  S(ember_lnl_report);
  F(ember_lnl_report, size); F(ember_lnl_report, trees);
  F(ember_lnl_report, trees_failed); F(ember_lnl_report, patterns);
  F(ember_lnl_report, tasks); F(ember_lnl_report, tasks_cpu);
  F(ember_lnl_report, tasks_opencl); F(ember_lnl_report, tasks_fpga_emu);
  F(ember_lnl_report, tasks_other); F(ember_lnl_report, tasks_failed);
  F(ember_lnl_report, setups); F(ember_lnl_report, ops);
  F(ember_lnl_report, recomputed); F(ember_lnl_report, hits);
  F(ember_lnl_report, vectors); F(ember_lnl_report, state_bytes);
  F(ember_lnl_report, exec_ns); F(ember_lnl_report, wall_ns);
  F(ember_lnl_report, instances);

  S(ember_pair_info);
  F(ember_pair_info, size); F(ember_pair_info, accelerator);
  F(ember_pair_info, state); F(ember_pair_info, completed);
  F(ember_pair_info, errors); F(ember_pair_info, timeouts);
  F(ember_pair_info, disabled_count);
  F(ember_pair_info, consecutive_failures); F(ember_pair_info, speed);
  F(ember_pair_info, fixed_ns); F(ember_pair_info, ns_per_unit);

  S(ember_platform_info);
  F(ember_platform_info, size); F(ember_platform_info, name);
  F(ember_platform_info, kind); F(ember_platform_info, state);
  F(ember_platform_info, device); F(ember_platform_info, loaded);
  F(ember_platform_info, workers); F(ember_platform_info, queued);
  F(ember_platform_info, running); F(ember_platform_info, completed);
  F(ember_platform_info, failed); F(ember_platform_info, retried);
  F(ember_platform_info, timeouts); F(ember_platform_info, reprograms);
  F(ember_platform_info, cache_budget);
  F(ember_platform_info, cache_resident);
  F(ember_platform_info, cache_blocks); F(ember_platform_info, cache_hits);
  F(ember_platform_info, cache_misses);
  F(ember_platform_info, cache_evictions);
  F(ember_platform_info, bytes_to); F(ember_platform_info, bytes_from);
  F(ember_platform_info, n_pairs); F(ember_platform_info, pairs);

  S(ember_accel_info);
  F(ember_accel_info, size); F(ember_accel_info, name);
  F(ember_accel_info, version); F(ember_accel_info, platforms);
  F(ember_accel_info, queued); F(ember_accel_info, origin);

  S(ember_client_stats);
  F(ember_client_stats, size); F(ember_client_stats, tasks_submitted);
  F(ember_client_stats, tasks_completed);
  F(ember_client_stats, tasks_fallback); F(ember_client_stats, reconnects);
  F(ember_client_stats, bytes_sent); F(ember_client_stats, bytes_received);
  F(ember_client_stats, bytes_sent_by_fd);
  F(ember_client_stats, plugins_loaded);
  F(ember_client_stats, plugins_refused);
  F(ember_client_stats, tasks_resubmitted);

  S(ember_train_epoch);
  F(ember_train_epoch, size); F(ember_train_epoch, epoch);
  F(ember_train_epoch, epochs); F(ember_train_epoch, loss);
  F(ember_train_epoch, train_accuracy); F(ember_train_epoch, test_accuracy);
  F(ember_train_epoch, seconds); F(ember_train_epoch, images_per_second);
  F(ember_train_epoch, n_stages); F(ember_train_epoch, stage_busy);
  F(ember_train_epoch, stage_platform);

  S(ember_train_params);
  F(ember_train_params, size); F(ember_train_params, net_path);
  F(ember_train_params, net_text); F(ember_train_params, net_len);
  F(ember_train_params, data_dir); F(ember_train_params, train_images);
  F(ember_train_params, train_labels); F(ember_train_params, n_train);
  F(ember_train_params, test_images); F(ember_train_params, test_labels);
  F(ember_train_params, n_test); F(ember_train_params, train_limit);
  F(ember_train_params, test_limit); F(ember_train_params, epochs);
  F(ember_train_params, batch); F(ember_train_params, micro_batch);
  F(ember_train_params, learning_rate); F(ember_train_params, momentum);
  F(ember_train_params, decay); F(ember_train_params, stages);
  F(ember_train_params, platform); F(ember_train_params, sync);
  F(ember_train_params, seed); F(ember_train_params, load_path);
  F(ember_train_params, save_path); F(ember_train_params, epoch_cb);
  F(ember_train_params, progress); F(ember_train_params, user);
  F(ember_train_params, layer_split_only);
  F(ember_train_params, fixed_splits);

  S(ember_train_result);
  F(ember_train_result, size); F(ember_train_result, epochs);
  F(ember_train_result, loss); F(ember_train_result, train_accuracy);
  F(ember_train_result, test_accuracy); F(ember_train_result, seconds);
  F(ember_train_result, tasks);

  printf("EMBER_BLOCK_CACHE %u\n", EMBER_BLOCK_CACHE);
  printf("EMBER_BLOCK_BROADCAST %u\n", EMBER_BLOCK_BROADCAST);
  printf("EMBER_BLOCK_STATE %u\n", EMBER_BLOCK_STATE);
  printf("EMBER_PROTOCOL_VERSION %d\n", EMBER_PROTOCOL_VERSION);
  return 0;
}
